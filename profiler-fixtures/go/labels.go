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
// The reference is Go's own goroutine profile (runtime/pprof's
// "goroutine" profile, which carries each goroutine's labels), written
// after the given seconds to the file named by the second argument.
//
// Protocol (as the other fixtures'): prints `ready pid=P`, waits for a
// line on stdin, runs for the given seconds, writes the reference, prints
// `goroutines=G`, then lingers until stdin closes.
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
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
func longLabelled(ch chan int) { <-ch }

//go:noinline
func manyLabelled(ch chan int) { <-ch }

// labelled runs f in a new goroutine under the label pairs kv.
func labelled(f func(), kv ...string) {
	go pprof.Do(context.Background(), pprof.Labels(kv...), func(context.Context) { f() })
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: labels SECONDS REFERENCE")
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
	time.Sleep(time.Duration(seconds * float64(time.Second)))
	out, err := os.Create(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "labels: the reference:", err)
		os.Exit(1)
	}
	if err := pprof.Lookup("goroutine").WriteTo(out, 0); err != nil {
		fmt.Fprintln(os.Stderr, "labels: the reference:", err)
		os.Exit(1)
	}
	out.Close()
	fmt.Printf("goroutines=%d\n", runtime.NumGoroutine())

	// Linger until stdin closes, so the process stays to be symbolized.
	for {
		if _, err := stdin.ReadString('\n'); err != nil {
			return
		}
	}
}
