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

// The origin's answer and what it sent behind it in the same segment (the
// rest of a TLS 1.3 server flight) are read with one read and reach the
// client with one write, whole: the guard read the header, then the body,
// and left the rest to a splice (read 5, read the body, write; then
// splice, splice, splice that finds nothing).
func TestAnOriginsAnswerAndTheRestOfItsFlightTakeOneReadAndOneWrite(t *testing.T) {
	clientFar, client := tcpPair(t)
	upstream, originFar := tcpPair(t)
	hello := buildHello(helloSpec{names: []string{"api.allowed.example"}})
	flight := append(serverHelloRecord(), appDataRecord(3000)...)
	if _, err := originFar.Write(flight); err != nil {
		t.Fatal(err)
	}
	waitQueued(t, upstream, len(flight))
	tun := &tunnel{client: client, upstream: upstream} // no record from the client: its host is never asked

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var down int64
	writes0 := threadWrites(t)
	reads0 := threadReads(t)
	reads1 := threadReads(t) // reading the file counts: reads1-reads0 is its share
	up, no := tun.sendHello(hello)
	if no.reason == "" {
		var more int64
		more, down, no = tun.guardHandshake(bufio.NewReader(client), 5*time.Second)
		up += more
	}
	reads2 := threadReads(t)
	reads, writes := reads2-reads1-(reads1-reads0), threadWrites(t)-writes0
	if no.reason != "" {
		t.Fatalf("refused: %s %s", no.reason, no.msg)
	}
	if up != int64(len(hello)) || down != int64(len(flight)) {
		t.Errorf("relayed %d up, %d down; want %d, %d", up, down, len(hello), len(flight))
	}
	// Nothing splices here: what the guard did not relay never comes.
	clientFar.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(flight))
	if n, err := io.ReadFull(clientFar, got); err != nil || !bytes.Equal(got, flight) {
		t.Errorf("the client got %d of the origin's %d bytes (%v)", n, len(flight), err)
	}
	// One write of the hello upstream, one read of the flight, one write
	// of it to the client.
	if reads != 1 || writes != 2 {
		t.Errorf("the guard made %d reads and %d writes on its thread, want 1 and 2", reads, writes)
	}
}

// appDataRecord is an application_data record of n bytes.
func appDataRecord(n int) []byte {
	return append([]byte{recordTypeApplicationData, 3, 3, byte(n >> 8), byte(n)}, bytes.Repeat([]byte{0xab}, n)...)
}
