package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
	"github.com/miekg/dns"
)

// leakCheck records goroutines and open fds once the proxy has served one
// request (so its long-lived goroutines exist), and checks at cleanup that
// both came back, waiting (bounded) for connections to finish closing.
func leakCheck(t *testing.T, e *env) {
	e.rawConnect("CONNECT warm-up.invalid:443 HTTP/1.1\r\n\r\n")
	goroutines, fds := runtime.NumGoroutine(), openFDs()
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			g, f := runtime.NumGoroutine(), openFDs()
			if g <= goroutines && f <= fds {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				n := runtime.Stack(buf, true)
				if n > 8192 {
					n = 8192
				}
				t.Errorf("leak: goroutines %d -> %d, sockets %d -> %d\n%s", goroutines, g, fds, f, buf[:n])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func fdTargets() []string {
	entries, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range entries {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"="+l)
	}
	return out
}

// openFDs counts open sockets. Pipes are left out: Go keeps the pipes it
// splices through in a pool for reuse, and frees them with the garbage.
func openFDs() int {
	n := 0
	for _, t := range fdTargets() {
		if strings.Contains(t, "=socket:") {
			n++
		}
	}
	return n
}

func TestResolverFaultsAreDNSErrorsWithoutHangsOrLeaks(t *testing.T) {
	e := newEnv(t, withConfig(func(c *policy.Config) { c.Timeouts.DNS = 300 * time.Millisecond }))
	port := itoa(e.origin.Addr.Port())
	release := make(chan struct{})
	defer close(release)
	e.dns.SetHandler(func(w dns.ResponseWriter, r *dns.Msg) bool {
		m := new(dns.Msg)
		switch {
		case strings.HasPrefix(r.Question[0].Name, "slow."):
			<-release // never answers within the timeout
			return true
		case strings.HasPrefix(r.Question[0].Name, "wrongid."):
			m.SetReply(r)
			m.Id++
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP("127.0.0.2")})
		case strings.HasPrefix(r.Question[0].Name, "servfail."):
			m.SetRcode(r, dns.RcodeServerFailure)
		default:
			return false
		}
		w.WriteMsg(m)
		return true
	})
	leakCheck(t, e)
	for _, host := range []string{"slow.cdn.allowed.example", "wrongid.cdn.allowed.example", "servfail.cdn.allowed.example"} {
		start := time.Now()
		_, _, resp := e.rawConnect("CONNECT " + host + ":" + port + " HTTP/1.1\r\n\r\n")
		if resp.StatusCode != 502 || resp.Header.Get(ReasonHeader) != "dns_error" {
			t.Errorf("%s: %d %s", host, resp.StatusCode, resp.Header.Get(ReasonHeader))
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s took %v: the DNS timeout did not hold", host, took)
		}
	}
}

func TestResolverDownIsDNSError(t *testing.T) {
	e := newEnv(t)
	// A resolver address where nothing listens.
	pc, _ := net.ListenPacket("udp", "127.0.0.1:0")
	dead := pc.LocalAddr().String()
	pc.Close()
	e.srv.opts.Resolver = NewResolver([]string{dead}, 500*time.Millisecond)
	_, _, resp := e.rawConnect("CONNECT x.cdn.allowed.example:" + itoa(e.origin.Addr.Port()) + " HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 502 || resp.Header.Get(ReasonHeader) != "dns_error" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
	}
}

// faultOrigin accepts one connection, reads the ClientHello record, then
// does what act says.
func faultOrigin(t *testing.T, act func(c *net.TCPConn)) (port string) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		hdr := make([]byte, 5)
		if _, err := io.ReadFull(c, hdr); err == nil {
			io.CopyN(io.Discard, c, int64(hdr[3])<<8|int64(hdr[4]))
			act(c.(*net.TCPConn))
		}
		c.Close()
	}()
	return itoa(uint16(ln.Addr().(*net.TCPAddr).Port))
}

// tunnelTo opens a raw tunnel to host:port and sends a ClientHello.
func (e *env) tunnelTo(t *testing.T, host, port string) (net.Conn, *bufio.Reader) {
	p := e.cfg.Integrations[0].Exemptions.AllowPorts
	e.cfg.Integrations[0].Exemptions.AllowPorts = append(p, uint16(atoi(port)))
	e.registry.Load(e.cfg)
	c, br, resp := e.rawConnect("CONNECT " + host + ":" + port + " HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
	}
	c.Write(buildHello(helloSpec{names: []string{host}}))
	return c, br
}

func atoi(s string) int {
	n := 0
	fmt.Sscan(s, &n)
	return n
}

func TestOriginResetMidTunnelClosesWithRightCounts(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("reset.cdn.allowed.example")
	leakCheck(t, e)
	port := faultOrigin(t, func(c *net.TCPConn) {
		c.Write([]byte(strings.Repeat("d", 1000)))
		c.SetLinger(0) // close with a reset
	})
	c, br := e.tunnelTo(t, "reset.cdn.allowed.example", port)
	defer c.Close()
	got, _ := io.ReadAll(br)
	if len(got) > 1000 {
		t.Fatalf("read %d bytes", len(got))
	}
	hello := len(buildHello(helloSpec{names: []string{"reset.cdn.allowed.example"}}))
	e.log.waitEvent(t, map[string]any{"event": "close", "host": "reset.cdn.allowed.example", "bytes_up": hello})
	ev := e.log.waitEvent(t, map[string]any{"event": "close", "host": "reset.cdn.allowed.example"})
	if down := int(ev["bytes_down"].(float64)); down != len(got) {
		t.Fatalf("close event bytes_down %d, client received %d", down, len(got))
	}
}

func TestStalledOriginIsCutAtIdleTimeout(t *testing.T) {
	e := newEnv(t, withConfig(func(c *policy.Config) { c.Timeouts.Idle = 500 * time.Millisecond }))
	e.resolveToOrigin("stall.cdn.allowed.example")
	leakCheck(t, e)
	stalled := make(chan struct{})
	port := faultOrigin(t, func(c *net.TCPConn) { <-stalled })
	defer close(stalled)
	c, br := e.tunnelTo(t, "stall.cdn.allowed.example", port)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("stalled tunnel not closed: %v", err)
	}
	e.log.waitEvent(t, map[string]any{"event": "close", "host": "stall.cdn.allowed.example", "reason": "timeout"})
}

func TestClientsAbortingMidwayLeakNothing(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	leakCheck(t, e)
	target := "api.allowed.example:" + itoa(e.origin.Addr.Port())
	hello := buildHello(helloSpec{names: []string{"api.allowed.example"}})
	for _, part := range [][]byte{
		[]byte("CONNECT " + target[:10]),                                     // mid request line
		[]byte("CONNECT " + target + " HTTP/1.1\r\nHost:"),                   // mid headers
		append([]byte("CONNECT "+target+" HTTP/1.1\r\n\r\n"), hello[:20]...), // mid ClientHello
	} {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(part)
		c.Close()
	}
	e.log.waitEvent(t, map[string]any{"event": "connect", "reason": "not_tls", "host": "api.allowed.example"})
}

// TestReloadStormDecidesEachConnectionByOneGeneration reloads the policy
// as fast as it can, alternating between a list with the host and one
// without, while clients connect; every decision must match the one
// generation it names.
func TestReloadStormDecidesEachConnectionByOneGeneration(t *testing.T) {
	e := newEnv(t, withHosts("other.allowed.example"), withConfig(func(c *policy.Config) {
		c.Integrations[0].Widen = policy.WidenAuto
		c.Limits.ConnectionsPerSecond, c.Limits.Burst = 1e9, 1<<30
	}))
	var mu sync.Mutex
	allowsAt := map[float64]bool{1: false} // generation -> api.allowed.example allowed
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := 1; ; v++ {
			select {
			case <-stop:
				return
			default:
			}
			allowed := v%2 == 1
			hosts := []string{"other.allowed.example"}
			if allowed {
				hosts = append(hosts, "api.allowed.example")
			}
			e.writeManifest(fmt.Sprintf("1.0.%d", v), hosts...)
			out := e.registry.Load(e.cfg)[0]
			mu.Lock()
			if out.Result == policy.Loaded {
				allowsAt[float64(out.Generation)] = allowed
			} else { // refused: the last good list stays in force
				allowsAt[float64(out.Generation)] = allowsAt[float64(out.Generation-1)]
			}
			mu.Unlock()
			e.srv.Redecide()
		}
	}()
	for i := 0; i < 300; i++ {
		e.rawConnect("CONNECT api.allowed.example:443 HTTP/1.1\r\n\r\n")
	}
	close(stop)
	<-done
	e.srv.opts.Suppress.Flush(true)
	checked := 0
	for _, ev := range e.log.events(t) {
		if ev["event"] != "connect" || ev["host"] != "api.allowed.example" || ev["suppressed"] != nil {
			continue
		}
		mu.Lock()
		allowed, known := allowsAt[ev["generation"].(float64)]
		mu.Unlock()
		if !known {
			t.Fatalf("decision under unknown generation %v", ev["generation"])
		}
		// Allowed by its generation: it got past the decision (to DNS, which
		// has no answer here). Denied: not_allowlisted.
		if got := ev["reason"] != "not_allowlisted"; got != allowed {
			t.Fatalf("generation %v allowed=%v, but the decision was %v/%v", ev["generation"], allowed, ev["decision"], ev["reason"])
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no decision checked")
	}
	t.Logf("%d decisions each matched their generation across %d generations", checked, len(allowsAt))
}
