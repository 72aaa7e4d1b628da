package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
)

// serveOn starts a Server for e's integration on a listener of its own,
// sharing gate, with limits of its own.
func (e *env) serveOn(gate *Gate, limits policy.Limits) (*Server, string) {
	s := New(Options{Key: e.dir, Registry: e.registry, Resolver: e.srv.opts.Resolver, Audit: e.audit,
		Suppress: e.srv.opts.Suppress, Limits: limits, Timeouts: e.cfg.Timeouts, Gate: gate})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	go s.Serve(ln)
	e.t.Cleanup(func() { s.Shutdown(e.t.Context()) })
	return s, ln.Addr().String()
}

// idleFlood opens n connections to addr that never send a byte, and
// returns them with a channel that receives once for each one egressd
// closes.
func idleFlood(t *testing.T, addr string, n int) ([]net.Conn, chan struct{}) {
	closed := make(chan struct{}, n)
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("flood dial: %v", err)
		}
		conns = append(conns, c)
		go func() {
			io.Copy(io.Discard, c) // returns when egressd closes it, or the test does
			closed <- struct{}{}
		}()
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns, closed
}

// connectStatus sends one CONNECT to addr and returns the status and reason.
func connectStatus(t *testing.T, addr, target string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return resp.StatusCode, resp.Header.Get(ReasonHeader)
}

// TestIdleFloodOnOneListenerLeavesOtherIntegrationsAndAdminServed: 300
// connections to integration A that never send a request used to count
// against the global cap from accept, with no per-integration bound, until
// B's next CONNECT was a 503 limit_exceeded (and, under a descriptor
// limit, /healthz timed out). Now A holds at most max_handshakes of them;
// the rest are closed at accept and audited, folded. B's CONNECT gets its
// 200 and /healthz answers, also while the admin endpoint itself is
// flooded with idle sockets.
func TestIdleFloodOnOneListenerLeavesOtherIntegrationsAndAdminServed(t *testing.T) {
	const flood, slots = 300, 16
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	gate := NewGate(200) // below the flood: on main the flood fills it
	limits := e.cfg.Limits
	limits.MaxHandshakes = slots
	a, addrA := e.serveOn(gate, limits)
	_, addrB := e.serveOn(gate, e.cfg.Limits)

	_, closed := idleFlood(t, addrA, flood)
	for i := 0; i < flood-slots; i++ {
		select {
		case <-closed:
		case <-time.After(30 * time.Second): // a failsafe, not a measure
			t.Fatalf("only %d of A's %d connections past its %d slots were closed", i, flood-slots, slots)
		}
	}
	if n := a.limiter.handshakes.Load(); n != slots {
		t.Fatalf("A holds %d handshake slots, want %d", n, slots)
	}

	start := time.Now()
	code, reason := connectStatus(t, addrB, "api.allowed.example:"+itoa(e.origin.Addr.Port()))
	t.Logf("B's CONNECT during A's idle flood: %d %s in %v (global open %d of %d)", code, reason, time.Since(start), gate.Open(), gate.Max())
	if code != 200 {
		t.Fatalf("B's CONNECT during A's idle flood: %d %s", code, reason)
	}

	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ServeAdmin(adminLn, AdminHandler(func() (bool, string) { return true, "ok" }, NewPromRegistry()))
	t.Cleanup(func() { adminLn.Close() })
	idleFlood(t, adminLn.Addr().String(), 3*adminMaxConns)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + adminLn.Addr().String() + "/healthz")
	if err != nil {
		t.Fatalf("/healthz during an idle flood of the admin endpoint: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("/healthz: %d %q", resp.StatusCode, body)
	}

	e.srv.opts.Suppress.Flush(true)
	var refused int64
	lines := 0
	// Its own line says it in msg; a summary carries no msg and lists the
	// sentence as a folded target (a refusal without a host folds by it).
	const atAccept = "connection closed at accept"
	for _, ev := range e.log.events(t) {
		if ev["reason"] != "limit_exceeded" {
			continue
		}
		if msg, _ := ev["msg"].(string); strings.HasPrefix(msg, atAccept) {
			refused++
			lines++
		}
		folded, _ := ev["folded"].([]any)
		for _, f := range folded {
			f, _ := f.(map[string]any)
			if target, _ := f["target"].(string); strings.HasPrefix(target, atAccept) {
				count, _ := f["count"].(float64)
				refused += int64(count)
				lines++
			}
		}
	}
	if refused != flood-slots {
		t.Fatalf("%d refusals at accept audited, want %d", refused, flood-slots)
	}
	t.Logf("A's %d excess connections: %d audit lines", refused, lines)
}
