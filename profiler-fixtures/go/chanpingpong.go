// The goroutine view's cost to a Go program: two goroutines pass a value
// back and forth over unbuffered channels as fast as they can (every round
// trip parks and readies each of them once: the path an event-based
// goroutine profiler would hook), next to N goroutines parked for good (a
// server's idle connections), which a profiler reading goroutines walks.
//
// With `labelled`, every goroutine runs under pprof labels, as a service
// labels its requests (runtime/pprof.Do): the two players under
// endpoint=/ping, the parked ones under one of 16 sets of three labels.
//
// Protocol (as the other fixtures'): `chanpingpong SECONDS [IDLE
// [labelled]]` prints `ready pid=P`, waits for a line on stdin, runs for
// SECONDS, prints `round_trips_per_sec=R goroutines=G`, then lingers until
// stdin closes.
package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"
)

//go:noinline
func idle(never chan struct{}) {
	<-never
}

//go:noinline
func ponger(ping, pong chan int) {
	for v := range ping {
		pong <- v
	}
}

//go:noinline
func pinger(ping, pong chan int, end time.Time) int {
	n := 0
	for ; n%1024 != 0 || time.Now().Before(end); n++ {
		ping <- n
		<-pong
	}
	return n
}

func main() {
	if len(os.Args) < 2 || len(os.Args) > 4 || len(os.Args) == 4 && os.Args[3] != "labelled" {
		fmt.Fprintln(os.Stderr, "usage: chanpingpong SECONDS [IDLE [labelled]]")
		os.Exit(2)
	}
	labelled := len(os.Args) == 4
	// Runs f in a new goroutine, under `labels` when labelled.
	spawn := func(f func(), labels ...string) {
		if !labelled {
			go f()
			return
		}
		go pprof.Do(context.Background(), pprof.Labels(labels...), func(context.Context) { f() })
	}
	seconds, err := strconv.ParseFloat(os.Args[1], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chanpingpong: SECONDS:", err)
		os.Exit(2)
	}
	idleCount := 0
	if len(os.Args) >= 3 {
		if idleCount, err = strconv.Atoi(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "chanpingpong: IDLE:", err)
			os.Exit(2)
		}
	}
	never := make(chan struct{})
	for i := 0; i < idleCount; i++ {
		spawn(func() { idle(never) }, "endpoint", fmt.Sprintf("/idle/%d", i%16), "tenant", fmt.Sprintf("t%d", i%4), "region", "eu")
	}
	ping, pong := make(chan int), make(chan int)
	spawn(func() { ponger(ping, pong) }, "endpoint", "/ping")
	fmt.Printf("ready pid=%d\n", os.Getpid())
	stdin := bufio.NewReader(os.Stdin)
	if _, err := stdin.ReadString('\n'); err != nil {
		os.Exit(1)
	}
	start := time.Now()
	end := start.Add(time.Duration(seconds * float64(time.Second)))
	var n int
	if labelled {
		pprof.Do(context.Background(), pprof.Labels("endpoint", "/ping"), func(context.Context) {
			n = pinger(ping, pong, end)
		})
	} else {
		n = pinger(ping, pong, end)
	}
	rate := float64(n) / time.Since(start).Seconds()
	fmt.Printf("round_trips_per_sec=%.0f goroutines=%d\n", rate, runtime.NumGoroutine())

	for {
		if _, err := stdin.ReadString('\n'); err != nil {
			return
		}
	}
}
