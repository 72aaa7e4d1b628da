package proxy

import (
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

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
