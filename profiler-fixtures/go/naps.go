// A Go program's thread blocking in system calls. The Go runtime does not
// register its threads with rseq, so the profiler cannot take their user
// stacks on the way back to user space; this is what such a thread gets.
//
// One goroutine, locked to its OS thread, alternates two blocking sites:
// main.longNap sleeps 30 ms and main.shortNap 10 ms in nanosleep, so the
// long one holds about three quarters of the thread's off-CPU time.
//
// Protocol (as the Rust fixtures'): prints `ready pid=P napper=T`, waits
// for a line on stdin, runs for the given seconds, prints `long_ns=L
// short_ns=S` (the time the thread measured in each nanosleep), then
// lingers until stdin closes.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

//go:noinline
func nap(ms int64) time.Duration {
	ts := syscall.NsecToTimespec(ms * int64(time.Millisecond))
	t0 := time.Now()
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
	}
	return time.Since(t0)
}

//go:noinline
func longNap() time.Duration { return nap(30) }

//go:noinline
func shortNap() time.Duration { return nap(10) }

func main() {
	seconds, err := strconv.ParseFloat(os.Args[len(os.Args)-1], 64)
	if err != nil || len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: naps SECONDS")
		os.Exit(2)
	}
	tids := make(chan int)
	start := make(chan struct{})
	done := make(chan [2]time.Duration)
	go func() {
		runtime.LockOSThread()
		tids <- syscall.Gettid()
		<-start
		var long, short time.Duration
		end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
		for time.Now().Before(end) {
			long += longNap()
			short += shortNap()
		}
		done <- [2]time.Duration{long, short}
	}()
	fmt.Printf("ready pid=%d napper=%d\n", os.Getpid(), <-tids)
	stdin := bufio.NewReader(os.Stdin)
	if _, err := stdin.ReadString('\n'); err != nil {
		os.Exit(1)
	}
	close(start)
	measured := <-done
	fmt.Printf("long_ns=%d short_ns=%d\n", measured[0].Nanoseconds(), measured[1].Nanoseconds())

	// Linger until stdin closes, so the process stays to be symbolized.
	for {
		if _, err := stdin.ReadString('\n'); err != nil {
			return
		}
	}
}
