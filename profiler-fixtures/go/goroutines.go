// A Go server in miniature: a few hundred goroutines that spend their time
// where a service's do, each kind in its own function:
//
//	main.receiver  100 goroutines, each waiting in a channel receive
//	main.locker     60 goroutines contending for one sync.Mutex
//	main.reader     60 goroutines reading from a TCP peer in this process
//	main.sleeper    60 goroutines in time.Sleep
//	main.selector   60 goroutines in a select over two channels
//	main.burner      2 goroutines on the CPU
//
// The reference is fgprof's method, in process: runtime.GoroutineProfile
// about 99 times a second, every goroutine's stack counted once per
// sample, whatever its state. That is the wall view a goroutine-aware
// profiler should agree with.
//
// Protocol (as the other fixtures'): prints `ready pid=P`, waits for a
// line on stdin, samples for the given seconds, writes the reference to
// the file named by the second argument (one line per distinct stack:
// `COUNT<TAB>root;...;leaf`, inlined frames included), prints
// `samples=N goroutines=G lockers=L phase_ns=P lock_ns=A unlock_ns=B` (the
// lockers' time in mu.Lock and mu.Unlock during the phase, as they measure
// it themselves), then lingers until stdin closes.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var sink uint64

const lockers = 60

//go:noinline
func receiver(ch chan int) {
	for v := range ch {
		sink += uint64(v)
	}
}

// The time the lockers spend in mu.Lock and in mu.Unlock (which, when
// the mutex is handed to a waiter, yields the P to it), summed, in ns.
var lockNs, unlockNs atomic.Int64

//go:noinline
func locker(mu *sync.Mutex) {
	for {
		t0 := time.Now()
		mu.Lock()
		t1 := time.Now()
		spin(20 * time.Microsecond)
		t2 := time.Now()
		mu.Unlock()
		lockNs.Add(int64(t1.Sub(t0)))
		unlockNs.Add(int64(time.Since(t2)))
	}
}

//go:noinline
func reader(conn net.Conn) {
	buf := make([]byte, 1)
	for {
		if _, err := io.ReadFull(conn, buf); err != nil {
			return
		}
	}
}

//go:noinline
func sleeper() {
	for {
		time.Sleep(5 * time.Millisecond)
	}
}

//go:noinline
func selector(a, b chan int) {
	for {
		select {
		case v := <-a:
			sink += uint64(v)
		case v := <-b:
			sink -= uint64(v)
		}
	}
}

//go:noinline
func burner() {
	for {
		spin(time.Millisecond)
	}
}

//go:noinline
func spin(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for i := 0; i < 1000; i++ {
			sink += uint64(i)
		}
	}
}

// feed wakes each of `chans` in turn, one every `every`.
func feed(chans []chan int, every time.Duration) {
	for i := 0; ; i++ {
		time.Sleep(every)
		chans[i%len(chans)] <- i
	}
}

// peers starts n connected TCP pairs on the loopback; the server end
// of each writes a byte every 20 ms. It returns the client ends.
func peers(n int) []net.Conn {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				for {
					time.Sleep(20 * time.Millisecond)
					if _, err := conn.Write([]byte{1}); err != nil {
						return
					}
				}
			}()
		}
	}()
	conns := make([]net.Conn, n)
	for i := range conns {
		if conns[i], err = net.Dial("tcp", ln.Addr().String()); err != nil {
			panic(err)
		}
	}
	return conns
}

func start() {
	recv := make([]chan int, 100)
	for i := range recv {
		recv[i] = make(chan int)
		go receiver(recv[i])
	}
	go feed(recv, time.Millisecond)
	var mu sync.Mutex
	for i := 0; i < lockers; i++ {
		go locker(&mu)
	}
	for _, conn := range peers(60) {
		go reader(conn)
	}
	for i := 0; i < 60; i++ {
		go sleeper()
	}
	a, b := make(chan int), make(chan int)
	for i := 0; i < 60; i++ {
		go selector(a, b)
	}
	go feed([]chan int{a, b}, 2*time.Millisecond)
	for i := 0; i < 2; i++ {
		go burner()
	}
}

// reference samples every goroutine's stack at 99 Hz for `seconds`, as
// fgprof does, and returns the counts per folded stack.
func reference(seconds float64) (map[string]int, int, int) {
	counts := map[string]int{}
	records := make([]runtime.StackRecord, 1024)
	samples, most := 0, 0
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	tick := time.NewTicker(time.Second / 99)
	defer tick.Stop()
	for time.Now().Before(end) {
		<-tick.C
		n, ok := runtime.GoroutineProfile(records)
		for !ok {
			records = make([]runtime.StackRecord, n*2)
			n, ok = runtime.GoroutineProfile(records)
		}
		for _, r := range records[:n] {
			counts[fold(r.Stack())]++
		}
		samples++
		if n > most {
			most = n
		}
	}
	return counts, samples, most
}

// fold names a stack root first, inlined frames included.
func fold(pcs []uintptr) string {
	var names []string
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		names = append(names, f.Function)
		if !more {
			break
		}
	}
	for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
		names[i], names[j] = names[j], names[i]
	}
	return strings.Join(names, ";")
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: goroutines SECONDS REFERENCE_FILE")
		os.Exit(2)
	}
	seconds, err := strconv.ParseFloat(os.Args[1], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goroutines: SECONDS:", err)
		os.Exit(2)
	}
	start()
	fmt.Printf("ready pid=%d\n", os.Getpid())
	stdin := bufio.NewReader(os.Stdin)
	if _, err := stdin.ReadString('\n'); err != nil {
		os.Exit(1)
	}
	t0, lock0, unlock0 := time.Now(), lockNs.Load(), unlockNs.Load()
	counts, samples, most := reference(seconds)
	phase, locked, unlocked := time.Since(t0), lockNs.Load()-lock0, unlockNs.Load()-unlock0
	stacks := make([]string, 0, len(counts))
	for s := range counts {
		stacks = append(stacks, s)
	}
	sort.Strings(stacks)
	var out strings.Builder
	for _, s := range stacks {
		fmt.Fprintf(&out, "%d\t%s\n", counts[s], s)
	}
	if err := os.WriteFile(os.Args[2], []byte(out.String()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "goroutines: writing the reference:", err)
		os.Exit(1)
	}
	fmt.Printf("samples=%d goroutines=%d lockers=%d phase_ns=%d lock_ns=%d unlock_ns=%d\n",
		samples, most, lockers, phase.Nanoseconds(), locked, unlocked)

	// Linger until stdin closes, so the process stays to be symbolized.
	for {
		if _, err := stdin.ReadString('\n'); err != nil {
			return
		}
	}
}
