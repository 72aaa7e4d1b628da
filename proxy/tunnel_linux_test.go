package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadWrites is how many write-family system calls the calling thread
// has made (syscw in /proc/thread-self/io). The caller holds
// runtime.LockOSThread, so the count is its goroutine's alone.
func threadWrites(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no syscw in /proc/thread-self/io")
	return 0
}

// A client that pipelined nothing behind its ClientHello leaves nothing to
// replay: the tunnel must not spend a write(2) of zero bytes on it (Go
// makes the call even for an empty slice), once per connection.
func TestATunnelWithNothingToReplayMakesNoWrite(t *testing.T) {
	clientFar, client := tcpPair(t)
	upstream, originFar := tcpPair(t)
	clientFar.Close() // both far ends already closed: each pump ends at its first look
	originFar.Close()
	tun := &tunnel{client: client, upstream: upstream}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadWrites(t)
	tun.run(nil)
	if got := threadWrites(t) - before; got != 0 {
		t.Fatalf("run(nil) made %d write calls on its thread, want 0", got)
	}
}

// threadReads is threadWrites for read-family calls (syscr). Reading the
// file is itself counted (its reads after the one that produced the
// figure), so callers subtract what two calls in a row show.
func threadReads(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatal("no syscr in /proc/thread-self/io")
	return 0
}

// waitQueued waits until c's receive queue holds n bytes (FIONREAD): the
// test's event that the origin's flight has arrived.
func waitQueued(t *testing.T, c *net.TCPConn, n int) {
	t.Helper()
	raw, _ := c.SyscallConn()
	for {
		var q int
		raw.Control(func(fd uintptr) { q, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
		if q >= n {
			return
		}
		runtime.Gosched()
	}
}

// The server's first record is read for the retry check in one read(2)
// when it is already there, not a header read and a body read, and is
// relayed whole.
func TestTheServersFirstFlightIsReadInOneCall(t *testing.T) {
	clientFar, client := tcpPair(t)
	upstream, origin := tcpPair(t)
	serverHello := append([]byte{recordTypeHandshake, 3, 3, 0, 40, handshakeTypeServerHello, 0, 0, 36, 3, 3}, bytes.Repeat([]byte{7}, 34)...)
	flight := serverHello
	origin.Write(flight)
	waitQueued(t, upstream, len(flight))
	tun := &tunnel{client: client, upstream: upstream}
	runtime.LockOSThread()
	own := -threadReads(t) + threadReads(t)
	before := threadReads(t)
	_, down, reason, msg := tun.retryGuard([]byte("hello"), bufio.NewReader(client), 10*time.Second)
	reads := threadReads(t) - before - own
	runtime.UnlockOSThread()
	if reason != "" || down != int64(len(flight)) {
		t.Fatalf("retryGuard: down %d of %d, %s %s", down, len(flight), reason, msg)
	}
	if reads != 1 {
		t.Errorf("read the server's first flight in %d read calls, want 1", reads)
	}
	got := make([]byte, len(flight))
	if _, err := io.ReadFull(clientFar, got); err != nil || !bytes.Equal(got, flight) {
		t.Fatalf("client got %x (%v), want %x", got, err, flight)
	}
}

// An origin that has not answered the ClientHello yet (or never will,
// until the ClientHello timeout) must cost egressd no flight buffer while
// it waits: thousands of tunnels to silent origins would otherwise pin
// 16 KiB each, as an idle tunnel would with a pipe.
func TestASilentOriginCostsNoFlightBufferWhileEgressdWaits(t *testing.T) {
	_, client := tcpPair(t)
	upstream, origin := tcpPair(t)
	tun := &tunnel{client: client, upstream: upstream}
	out0 := flightBuffersOut.Load()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tun.retryGuard([]byte("hello"), bufio.NewReader(client), time.Minute)
	}()
	waitFor(t, func() bool { // parked in the poller inside readFirstFlight
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "proxy.readFirstFlight") && strings.Contains(g, "runtime_pollWait") {
				return true
			}
		}
		return false
	})
	if held := flightBuffersOut.Load() - out0; held != 0 {
		t.Errorf("waiting on a silent origin holds %d flight buffers, want 0", held)
	}
	origin.Close()
	<-done
	if held := flightBuffersOut.Load() - out0; held != 0 {
		t.Errorf("%d flight buffers not given back", held)
	}
}
