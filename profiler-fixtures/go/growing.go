// Goroutines whose stacks grow and shrink all the time: each recurses to a
// depth that changes every round (the runtime copies its stack to a larger
// one as it goes, and the garbage collector shrinks it again), then sleeps
// at the bottom. A reader from outside sees stacks move under it. Four
// more goroutines spin in main.spin, a loop without calls, which only the
// runtime's preemption signal stops (asynchronous preemption): one read
// while preempted so is stopped in runtime.asyncPreempt, the frame above
// it at the interrupted instruction.
//
// Protocol (as the other fixtures'): `growing SECONDS` prints `ready
// pid=P`, waits for a line on stdin, runs for SECONDS, prints `rounds=N`,
// then lingers until stdin closes.
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
)

var rounds atomic.Int64

//go:noinline
func deep(n int, pad [64]byte) byte {
	if n == 0 {
		time.Sleep(time.Millisecond)
		return pad[0]
	}
	pad[n%64]++
	return deep(n-1, pad) + pad[1]
}

var spun atomic.Uint64

//go:noinline
func spin(seed uint64) uint64 {
	x := seed
	for i := uint64(0); i < 1<<62; i++ {
		x ^= i * 0x9e3779b97f4a7c15
		x = x<<7 | x>>57
	}
	return x
}

//go:noinline
func spinner(seed uint64) {
	spun.Add(spin(seed))
}

//go:noinline
func grower(seed int) {
	for i := seed; ; i++ {
		deep(1+(i*7919)%400, [64]byte{})
		rounds.Add(1)
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: growing SECONDS")
		os.Exit(2)
	}
	seconds, err := strconv.ParseFloat(os.Args[1], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "growing: SECONDS:", err)
		os.Exit(2)
	}
	fmt.Printf("ready pid=%d\n", os.Getpid())
	stdin := bufio.NewReader(os.Stdin)
	if _, err := stdin.ReadString('\n'); err != nil {
		os.Exit(1)
	}
	for i := 0; i < 50; i++ {
		go grower(i * 13)
	}
	for i := uint64(1); i <= 4; i++ {
		go spinner(i)
	}
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	for time.Now().Before(end) {
		runtime.GC()
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("rounds=%d\n", rounds.Load())
	for {
		if _, err := stdin.ReadString('\n'); err != nil {
			return
		}
	}
}
