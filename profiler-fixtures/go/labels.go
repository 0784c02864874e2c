// A Go service's request handlers in miniature, labelled the way services
// label their work (runtime/pprof.Do), each kind waiting in its own
// function:
//
//	main.slowRequest  40 goroutines labelled endpoint=/slow tenant=a,
//	                  sleeping 3 ms at a time
//	main.queued       20 goroutines labelled endpoint=/queue, waiting
//	                  in a channel receive
//	main.idle         20 goroutines with no labels, waiting on a channel
//	main.longLabelled  1 goroutine with a 100-byte key and a 300-byte
//	                  value
//	main.manyLabelled  1 goroutine with 70 labels, l00=v00 to l69=v69
//
// and one goroutine on the CPU, in turn 3.3 ms in main.heavy under
// endpoint=/heavy and 1.1 ms in main.light under endpoint=/light (a
// cycle out of step with Go's 100 Hz profiling timer), which
// measures the time it spends in each.
//
// The references are Go's own profiles of the same run, written to the
// directory named by the second argument: its goroutine profile at the
// end (goroutine.pb.gz, each goroutine with its labels) and its CPU
// profile of the whole run at 1000 Hz (cpu.pb.gz, each sample with the
// labels of the goroutine it caught).
//
// Protocol (as the other fixtures'): prints `ready pid=P`, waits for a
// line on stdin, runs for the given seconds, writes the references,
// prints `goroutines=G heavy_ns=H light_ns=L`, then lingers until stdin
// closes.
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

var sink int

//go:noinline
func slowRequest() {
	for {
		time.Sleep(3 * time.Millisecond)
	}
}

//go:noinline
func queued(ch chan int) {
	for v := range ch {
		sink += v
	}
}

//go:noinline
func idle(ch chan int) {
	for v := range ch {
		sink -= v
	}
}

//go:noinline
func heavy(d time.Duration) time.Duration { return spin(d) }

//go:noinline
func light(d time.Duration) time.Duration { return spin(d) }

// spin runs on the CPU for d, and says for how long it did.
func spin(d time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < d {
		for i := 0; i < 1000; i++ {
			sink += i
		}
	}
	return time.Since(start)
}

// burn takes turns in heavy and light, each under its label, until stop
// closes; then sends the time spent in each.
func burn(stop chan struct{}, spent chan [2]time.Duration) {
	var h, l time.Duration
	ctx := context.Background()
	for {
		select {
		case <-stop:
			spent <- [2]time.Duration{h, l}
			return
		default:
		}
		pprof.Do(ctx, pprof.Labels("endpoint", "/heavy"), func(context.Context) {
			h += heavy(3300 * time.Microsecond)
		})
		pprof.Do(ctx, pprof.Labels("endpoint", "/light"), func(context.Context) {
			l += light(1100 * time.Microsecond)
		})
	}
}

//go:noinline
func longLabelled(ch chan int) { <-ch }

//go:noinline
func manyLabelled(ch chan int) { <-ch }

// labelled runs f in a new goroutine under the label pairs kv.
func labelled(f func(), kv ...string) {
	go pprof.Do(context.Background(), pprof.Labels(kv...), func(context.Context) { f() })
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: labels SECONDS REFERENCE_DIR")
		os.Exit(2)
	}
	seconds, err := strconv.ParseFloat(os.Args[1], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "labels: SECONDS:", err)
		os.Exit(2)
	}
	never := make(chan int)
	for i := 0; i < 40; i++ {
		labelled(slowRequest, "endpoint", "/slow", "tenant", "a")
	}
	for i := 0; i < 20; i++ {
		labelled(func() { queued(never) }, "endpoint", "/queue")
		go idle(never)
	}
	labelled(func() { longLabelled(never) }, strings.Repeat("k", 100), strings.Repeat("v", 300))
	var many []string
	for i := 0; i < 70; i++ {
		many = append(many, fmt.Sprintf("l%02d", i), fmt.Sprintf("v%02d", i))
	}
	labelled(func() { manyLabelled(never) }, many...)

	fmt.Printf("ready pid=%d\n", os.Getpid())
	stdin := bufio.NewReader(os.Stdin)
	if _, err := stdin.ReadString('\n'); err != nil {
		os.Exit(1)
	}
	cpu, err := os.Create(filepath.Join(os.Args[2], "cpu.pb.gz"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "labels: the CPU profile:", err)
		os.Exit(1)
	}
	// 1000 Hz, not Go's 100: enough samples for shares within a few
	// points (StartCPUProfile keeps a rate set before it, with a warning).
	runtime.SetCPUProfileRate(1000)
	if err := pprof.StartCPUProfile(cpu); err != nil {
		fmt.Fprintln(os.Stderr, "labels: the CPU profile:", err)
		os.Exit(1)
	}
	stop, spent := make(chan struct{}), make(chan [2]time.Duration)
	go burn(stop, spent)
	time.Sleep(time.Duration(seconds * float64(time.Second)))
	close(stop)
	burnt := <-spent
	pprof.StopCPUProfile()
	cpu.Close()
	out, err := os.Create(filepath.Join(os.Args[2], "goroutine.pb.gz"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "labels: the goroutine profile:", err)
		os.Exit(1)
	}
	if err := pprof.Lookup("goroutine").WriteTo(out, 0); err != nil {
		fmt.Fprintln(os.Stderr, "labels: the goroutine profile:", err)
		os.Exit(1)
	}
	out.Close()
	fmt.Printf("goroutines=%d heavy_ns=%d light_ns=%d\n", runtime.NumGoroutine(),
		burnt[0].Nanoseconds(), burnt[1].Nanoseconds())

	// Linger until stdin closes, so the process stays to be symbolized.
	for {
		if _, err := stdin.ReadString('\n'); err != nil {
			return
		}
	}
}
