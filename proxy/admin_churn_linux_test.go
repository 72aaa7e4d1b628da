package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// delivered waits until the kernel has acknowledged everything written on
// c (its send queue is empty): the bytes are in the admin socket's
// receive queue.
func delivered(t *testing.T, c net.Conn) {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; runtime.Gosched() { // a failsafe, not a measure
		var n int
		rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) })
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes never acknowledged", n)
		}
	}
}

// TestAdminChurnOfSilentAndDrippingConnectionsNeverEvictsAProbe: 200
// goroutines connecting to the admin port and sending nothing (~10k
// connections a second) made a third to a half of /readyz probes fail:
// each newcomer evicted the oldest connection still waiting for its
// request, and a probe counted as waiting until net/http had parsed its
// head. Now a newcomer evicts first a connection that has sent no byte,
// oldest first, then one whose head is incomplete; one whose head arrived
// is never evicted (unless it is stuck writing to a client that does not
// read). Each probe here sends the first line of its head, sits through
// twice the reserve of silent newcomers, each admitted, beside drippers
// that sent a byte before it, and then finishes its head: every probe of
// the sequence must be answered. The churn is bounded by count.
func TestAdminChurnOfSilentAndDrippingConnectionsNeverEvictsAProbe(t *testing.T) {
	const probes, drippers, churnPerProbe = 5, 4, 2 * adminMaxConns
	// Eviction is under test, not the head timeout: on a loaded machine 64
	// admissions took longer than its 2 s, and the probe was closed by it
	// (CI, 14:09 today).
	old := adminHeaderTimeout
	adminHeaderTimeout = 5 * time.Minute
	t.Cleanup(func() { adminHeaderTimeout = old })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	admitted := make(chan struct{}, probes*(drippers+churnPerProbe+1))
	onState := func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			admitted <- struct{}{}
		}
	}
	go serveAdmin(ln, AdminHandler(func() (bool, string) { return true, "ready" }, NewPromRegistry()), onState)
	dial := func(first string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		select {
		case <-admitted:
		case <-time.After(30 * time.Second): // a failsafe, not a measure
			t.Fatal("a connection was never admitted")
		}
		if first != "" {
			io.WriteString(c, first)
			delivered(t, c)
		}
		return c
	}

	for i := range probes {
		for range drippers {
			dial("G")
		}
		probe := dial("GET /readyz HTTP/1.1\r\n")
		for range churnPerProbe {
			dial("")
		}
		io.WriteString(probe, "Host: admin\r\n\r\n")
		probe.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(probe), nil)
		if err != nil {
			t.Fatalf("probe %d of %d, behind %d silent newcomers: %v", i+1, probes, churnPerProbe, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "ready" {
			t.Fatalf("probe %d: %d %q", i+1, resp.StatusCode, body)
		}
	}
}
