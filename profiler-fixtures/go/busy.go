// A Go program that keeps the host's CPUs busy, as a service under load
// does: one goroutine per CPU, each computing for a random 1 to 4 ms
// (main.compute) and then sleeping 2 ms (main.snooze), over and over. Each
// measures the wall time it spends inside each function.
//
// Protocol (as the other fixtures'): prints `ready pid=P`, waits for a
// line on stdin, runs for the given seconds, prints `goroutines=G
// snooze_ns=S compute_ns=C` (summed over the goroutines), then lingers
// until stdin closes.
package main

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

var sink uint64

//go:noinline
func compute(d time.Duration) time.Duration {
	t0 := time.Now()
	x := uint64(t0.UnixNano())
	for time.Since(t0) < d {
		for i := 0; i < 1000; i++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
	}
	sink += x
	return time.Since(t0)
}

//go:noinline
func snooze() time.Duration {
	t0 := time.Now()
	time.Sleep(2 * time.Millisecond)
	return time.Since(t0)
}

func worker(end time.Time, seed int64, out *[2]time.Duration, wg *sync.WaitGroup) {
	defer wg.Done()
	r := rand.New(rand.NewSource(seed))
	for time.Now().Before(end) {
		out[0] += compute(time.Duration(1000+r.Intn(3000)) * time.Microsecond)
		out[1] += snooze()
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: busy SECONDS")
		os.Exit(2)
	}
	seconds, err := strconv.ParseFloat(os.Args[1], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "busy: SECONDS:", err)
		os.Exit(2)
	}
	fmt.Printf("ready pid=%d\n", os.Getpid())
	stdin := bufio.NewReader(os.Stdin)
	if _, err := stdin.ReadString('\n'); err != nil {
		os.Exit(1)
	}
	n := runtime.NumCPU()
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	totals := make([][2]time.Duration, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go worker(end, int64(i+1), &totals[i], &wg)
	}
	wg.Wait()
	var computed, snoozed time.Duration
	for _, t := range totals {
		computed += t[0]
		snoozed += t[1]
	}
	fmt.Printf("goroutines=%d snooze_ns=%d compute_ns=%d\n", n, snoozed.Nanoseconds(), computed.Nanoseconds())
	stdin.ReadString('\n')
}
