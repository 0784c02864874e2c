// A Go program as Go programs are built: `go build`, the Go runtime's own
// frame pointers, and a frameless leaf. main.spin keeps no frame (it has no
// locals and calls nothing), so a frame-pointer walk from a sample in it
// skips its caller; main.heavy calls it for about three times as many
// iterations as main.light.
//
// Protocol (as the Rust fixtures'): prints `ready pid=P`, waits for a line
// on stdin, runs for the given seconds while runtime/pprof records its own
// CPU profile into the given file (at 500 Hz, the rate the test profiles
// at), prints `heavy_ns=H light_ns=L` (wall time in each, one goroutine
// spinning), then lingers until stdin closes.
package main

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"
)

//go:noinline
func spin(n int) int {
	x := 1
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1
	}
	return x
}

//go:noinline
func heavy(n int) int { return spin(3*n) + 1 }

//go:noinline
func light(n int) int { return spin(n) + 2 }

func main() {
	seconds, err := strconv.ParseFloat(os.Args[1], 64)
	if err != nil || len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: split SECONDS CPU_PROFILE")
		os.Exit(2)
	}
	out, err := os.Create(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("ready pid=%d\n", os.Getpid())
	stdin := bufio.NewReader(os.Stdin)
	if _, err := stdin.ReadString('\n'); err != nil {
		os.Exit(1)
	}

	// Setting the rate first is the documented way to profile at more
	// than 100 Hz; StartCPUProfile then warns that the rate is already set.
	runtime.SetCPUProfileRate(500)
	if err := pprof.StartCPUProfile(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var heavyNs, lightNs time.Duration
	sink := 0
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	for time.Now().Before(end) {
		// Rounds of one fixed length can line up with a periodic sampler
		// (this one's and Go's alike) and show it the same phase every
		// time: Go's own profile once read 69% for main.heavy's 75%. The
		// unit is drawn between 0.5 and 1.5 of 300,000 iterations.
		n := 150000 + rand.Intn(300000)
		t0 := time.Now()
		sink += heavy(n)
		t1 := time.Now()
		sink += light(n)
		heavyNs += t1.Sub(t0)
		lightNs += time.Since(t1)
	}
	pprof.StopCPUProfile()
	out.Close()
	fmt.Printf("heavy_ns=%d light_ns=%d sink=%d\n", heavyNs.Nanoseconds(), lightNs.Nanoseconds(), uint64(sink)%10)

	// Linger until stdin closes, so the process stays to be symbolized.
	for {
		if _, err := stdin.ReadString('\n'); err != nil {
			return
		}
	}
}
