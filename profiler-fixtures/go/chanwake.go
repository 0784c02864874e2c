// A Go pipeline whose stages wait on each other through channels, as a
// service's workers do: a producer goroutine computes about 5 ms (argv[2]) in
// main.producerCompute, then hands the result over in main.producerSend
// on an unbuffered channel, where a relay goroutine waits in
// main.relayWait; the relay passes it on in main.relaySend to the
// consumer (the main goroutine), which waits in main.consumerWait: the
// consumer waits on the relay, which waits on the producer's compute. A
// sleeper goroutine naps 3 ms at a time in
// main.sleeperNap (a timer wakes it); a reader goroutine waits in
// main.netRead on a loopback TCP connection that a writer feeds every 3 ms
// (the network poller wakes it). The consumer measures its own time in
// consumerWait; each item carries the time it was sent, so the relay and
// the consumer measure the time from each send to their receive's return
// (handoff: runnable, waiting for a thread). Runs argv[1] seconds, the
// producer computing argv[2] milliseconds an item (5 if not given), then
// prints "chanwake pid=P waited_ns=W relay_handoff_ns=R handoff_ns=H
// items=N" and exits.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"
)

//go:noinline
func producerCompute(d time.Duration) uint64 {
	end := time.Now().Add(d)
	h := uint64(1469598103934665603)
	for time.Now().Before(end) {
		for i := 0; i < 1024; i++ {
			h = (h ^ uint64(i)) * 1099511628211
		}
	}
	return h
}

// An item and when it was sent.
type item struct {
	v    uint64
	sent time.Time
}

//go:noinline
func producerSend(ch chan<- item, v uint64) {
	ch <- item{v, time.Now()}
}

//go:noinline
func producer(ch chan<- item, until time.Time, compute time.Duration) {
	for time.Now().Before(until) {
		producerSend(ch, producerCompute(compute))
	}
	close(ch)
}

//go:noinline
func relayWait(in <-chan item) (item, bool) {
	it, ok := <-in
	return it, ok
}

//go:noinline
func relaySend(out chan<- item, v uint64) {
	out <- item{v, time.Now()}
}

// relay passes items on from in to out; its handoff time is in *handoff
// once out is closed.
func relay(in <-chan item, out chan<- item, handoff *time.Duration) {
	for {
		it, ok := relayWait(in)
		if !ok {
			break
		}
		*handoff += time.Since(it.sent)
		relaySend(out, it.v)
	}
	close(out)
}

//go:noinline
func consumerWait(ch <-chan item) (item, bool) {
	it, ok := <-ch
	return it, ok
}

//go:noinline
func sleeperNap() {
	time.Sleep(3 * time.Millisecond)
}

func sleeper(until time.Time) {
	for time.Now().Before(until) {
		sleeperNap()
	}
}

//go:noinline
func netRead(conn net.Conn, buf []byte) error {
	_, err := io.ReadFull(conn, buf)
	return err
}

// network starts a reader on one end of a loopback TCP connection and a
// writer on the other, which writes 8 bytes every 3 ms until `until`.
func network(until time.Time) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		conn, err := listener.Accept()
		if err != nil {
			panic(err)
		}
		buf := make([]byte, 8)
		for netRead(conn, buf) == nil {
		}
	}()
	conn, err := net.Dial("tcp", listener.Addr().String())
	if err != nil {
		panic(err)
	}
	go func() {
		for time.Now().Before(until) {
			time.Sleep(3 * time.Millisecond)
			if _, err := conn.Write(make([]byte, 8)); err != nil {
				panic(err)
			}
		}
		conn.Close()
	}()
}

func main() {
	seconds, err := strconv.ParseFloat(os.Args[1], 64)
	computeMs := 5.0
	if err == nil && len(os.Args) > 2 {
		computeMs, err = strconv.ParseFloat(os.Args[2], 64)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "usage: chanwake SECONDS [COMPUTE_MS]")
		os.Exit(2)
	}
	until := time.Now().Add(time.Duration(seconds * 1e9))
	ch, relayed := make(chan item), make(chan item)
	var relayHandoff, handoff time.Duration
	go producer(ch, until, time.Duration(computeMs*1e6))
	go relay(ch, relayed, &relayHandoff)
	go sleeper(until)
	network(until)
	var waited time.Duration
	var items, sum uint64
	for {
		start := time.Now()
		it, ok := consumerWait(relayed)
		waited += time.Since(start)
		if !ok {
			break
		}
		handoff += time.Since(it.sent)
		items++
		sum += it.v
	}
	fmt.Printf("chanwake pid=%d waited_ns=%d relay_handoff_ns=%d handoff_ns=%d items=%d sum=%d\n",
		os.Getpid(), waited.Nanoseconds(), relayHandoff.Nanoseconds(), handoff.Nanoseconds(), items, sum&0xff)
}
