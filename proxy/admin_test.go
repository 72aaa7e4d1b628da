package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDripFedAdminConnectionsCannotLockOutTheProbe: the admin endpoint
// evicts the oldest connection that has not sent its request, and a
// connection left that queue at net/http's StateActive, documented as
// "has read 1 or more bytes of a request". Had it fired at the first
// byte, 32 connections that each sent one byte would have held every admin
// slot, not evictable, for the whole header timeout. (Go 1.26 fires it only
// once the request head is read or has failed, so this passes on main too;
// the queue no longer depends on when it fires.) A connection now counts
// as idle, and evictable, until its request head is complete and the
// handler runs. Twice the reserve of one-byte connections, each admitted,
// and a probe after them still gets its answer; the oldest drip is evicted.
func TestDripFedAdminConnectionsCannotLockOutTheProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	admitted := make(chan struct{}, 4*adminMaxConns)
	onState := func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			admitted <- struct{}{}
		}
	}
	go serveAdmin(ln, AdminHandler(func() (bool, string) { return true, "ready" }, NewPromRegistry()), onState)

	var drips []net.Conn
	for i := 0; i < 2*adminMaxConns; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "G"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-admitted: // the server has accepted and admitted this drip
		case <-time.After(30 * time.Second): // a failsafe, not a measure
			t.Fatalf("drip %d was never admitted", i)
		}
		drips = append(drips, c)
	}

	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + ln.Addr().String() + "/readyz")
	if err != nil {
		t.Fatalf("/readyz behind %d drip-fed connections: %v", len(drips), err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "ready" {
		t.Fatalf("/readyz: %d %q", resp.StatusCode, body)
	}
	drips[0].SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := drips[0].Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("the oldest drip was not evicted: %d %v", n, err)
	}
}

// TestAdminRequestsDeclaringAnUnsentBodyAreAnsweredAndClosed: a complete
// "GET /readyz" declaring a body it never sends was answered, then held
// while net/http waited for the body; its head had arrived, so nothing
// evicted it, and about sixteen a second filled every admin slot (round 3
// attacker). Such a request is now refused and its connection closed at
// once: more of them than the reserve holds, all open together, each gets
// its 400 and its end of file, and a probe still answers.
func TestAdminRequestsDeclaringAnUnsentBodyAreAnsweredAndClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go serveAdmin(ln, AdminHandler(func() (bool, string) { return true, "ready" }, NewPromRegistry()), nil)
	for i := 0; i < adminMaxConns+8; i++ {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(30 * time.Second)) // a failsafe, not a measure
		io.WriteString(c, "GET /readyz HTTP/1.1\r\nHost: admin\r\nContent-Length: 1000\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("connection %d: %d, want 400", i, resp.StatusCode)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("connection %d left open after its answer: %v", i, err)
		}
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + ln.Addr().String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/readyz: %d", resp.StatusCode)
	}
}
