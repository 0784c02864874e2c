// A Go program that lives tens of milliseconds, as a build step, a CLI
// call or a cron job does: it spins in main.work for argv[1] seconds of
// wall time, prints "brief pid=P cpu_ns=C" (the CPU time of the whole
// process, runtime threads included) and exits. The tests build it as
// vendors ship Go: `-ldflags=-s -w`, no symbols and no DWARF.
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

//go:noinline
func work(seconds float64) uint64 {
	end := time.Now().Add(time.Duration(seconds * 1e9))
	h := uint64(1469598103934665603)
	for time.Now().Before(end) {
		for i := 0; i < 4096; i++ {
			h = (h ^ uint64(i)) * 1099511628211
		}
	}
	return h
}

func main() {
	seconds, err := strconv.ParseFloat(os.Args[1], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "usage: brief SPIN_SECONDS")
		os.Exit(2)
	}
	h := work(seconds)
	var usage syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	cpu := usage.Utime.Nano() + usage.Stime.Nano()
	fmt.Printf("brief pid=%d cpu_ns=%d hash=%d\n", os.Getpid(), cpu, h&0xff)
}
