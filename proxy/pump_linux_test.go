package proxy

import (
	"bytes"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// A peer that sends its last bytes and its FIN back to back wakes the
// edge-triggered poller once; the pump must still deliver every byte and
// then see the close.
func TestPumpDeliversTheLastBytesThatArriveWithTheFIN(t *testing.T) {
	for _, size := range []int{1, 1 << 10, 3 << 20} {
		writer, src := tcpPair(t)
		dst, reader := tcpPair(t)
		payload := bytes.Repeat([]byte("egressd"), size/7+1)[:size]
		done := make(chan int64, 1)
		go func() {
			n, err := pump(dst, src)
			if err != nil {
				t.Errorf("pump: %v", err)
			}
			dst.CloseWrite()
			done <- n
		}()
		go func() { writer.Write(payload); writer.CloseWrite() }()
		got, err := io.ReadAll(reader)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("size %d: got %d bytes (%v), want %d", size, len(got), err, size)
		}
		if n := <-done; n != int64(size) {
			t.Fatalf("size %d: pump counted %d", size, n)
		}
	}
}

// pipeFDs counts this process's open pipes.
func pipeFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, "pipe:") {
			n++
		}
	}
	return n
}

// 10,000 idle tunnels must not pin 40,000 pipe fds: a pump waiting on an
// idle socket holds no pipe, and the pool's spare pipes are closed once the
// collector drops them.
func TestIdlePumpsHoldNoPipes(t *testing.T) {
	runtime.GC()
	runtime.GC()
	before := pipeFDs(t)
	const tunnels = 20
	for range tunnels {
		writer, src := tcpPair(t)
		dst, reader := tcpPair(t)
		go pump(dst, src)
		writer.Write(make([]byte, 256<<10))
		if _, err := io.ReadFull(reader, make([]byte, 256<<10)); err != nil {
			t.Fatal(err)
		}
	} // every pump is now parked on an idle socket
	waitFor(t, func() bool {
		runtime.GC() // the pool keeps spares across one collection
		return pipeFDs(t) <= before
	})
}

// With every pipe of the budget open, a direction copies through a
// user-space buffer: every byte still arrives, and so does the FIN.
func TestPumpPastThePipeBudgetDeliversEveryByteAndTheFIN(t *testing.T) {
	budget := pipeBudget
	pipeBudget = func() int64 { return 0 }
	t.Cleanup(func() { pipeBudget = budget })
	runtime.GC() // empty the pool: pooled pipes are spent budget too
	runtime.GC()
	opened := pipesOpen.Load()
	for _, size := range []int{1, 1 << 10, 3 << 20} {
		writer, src := tcpPair(t)
		dst, reader := tcpPair(t)
		payload := bytes.Repeat([]byte("egressd"), size/7+1)[:size]
		done := make(chan int64, 1)
		go func() {
			n, err := pump(dst, src)
			if err != nil {
				t.Errorf("pump: %v", err)
			}
			dst.CloseWrite()
			done <- n
		}()
		go func() { writer.Write(payload); writer.CloseWrite() }()
		got, err := io.ReadAll(reader)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("size %d: got %d bytes (%v), want %d", size, len(got), err, size)
		}
		if n := <-done; n != int64(size) {
			t.Fatalf("size %d: pump counted %d", size, n)
		}
	}
	if now := pipesOpen.Load(); now > opened {
		t.Fatalf("%d pipes opened past a budget of 0", now-opened)
	}
}
