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
	"github.com/miekg/dns"
)

func TestRebindingAnswersAreRefused(t *testing.T) {
	e := newEnv(t)
	port := itoa(e.origin.Addr.Port())
	cases := []struct {
		name    string
		host    string
		records []string
		reason  string
	}{
		{"rebinding_answer_loopback", "lo.cdn.allowed.example", []string{"lo.cdn.allowed.example. 60 IN A 127.0.0.1"}, "private_address"},
		{"rebinding_answer_cloud_metadata", "md.cdn.allowed.example", []string{"md.cdn.allowed.example. 60 IN A 169.254.169.254"}, "private_address"},
		{"rebinding_answer_private_10", "ten.cdn.allowed.example", []string{"ten.cdn.allowed.example. 60 IN A 10.1.2.3"}, "private_address"},
		{"rebinding_mixed_public_and_private", "mix.cdn.allowed.example", []string{"mix.cdn.allowed.example. 60 IN A 93.184.216.34", "mix.cdn.allowed.example. 60 IN A 10.0.0.1"}, "private_address"},
		// IPv4 special-purpose ranges whose IPv6 twins were already refused
		// (issue 18, ninth round): AS112 direct delegation, AS112-v4, AMT.
		{"answer_as112_direct_delegation", "as112.cdn.allowed.example", []string{"as112.cdn.allowed.example. 60 IN A 192.175.48.1"}, "private_address"},
		{"answer_as112_v4", "as112v4.cdn.allowed.example", []string{"as112v4.cdn.allowed.example. 60 IN A 192.31.196.1"}, "private_address"},
		{"answer_amt", "amt.cdn.allowed.example", []string{"amt.cdn.allowed.example. 60 IN A 192.52.193.1"}, "private_address"},
		{"rebinding_aaaa_mapped_metadata", "v6.cdn.allowed.example", []string{"v6.cdn.allowed.example. 60 IN AAAA ::ffff:169.254.169.254"}, "private_address"},
		{"rebinding_cname_to_localhost", "cn.cdn.allowed.example", []string{"cn.cdn.allowed.example. 60 IN CNAME localhost."}, "dns_error"},
		{"rebinding_cname_to_ip_looking_name", "cn2.cdn.allowed.example", []string{"cn2.cdn.allowed.example. 60 IN CNAME 127.0.0.1."}, "dns_error"},
		{"out_of_chain_record_ignored", "ooc.cdn.allowed.example", []string{"ooc.cdn.allowed.example. 60 IN CNAME target.allowed.example.", "target.allowed.example. 60 IN A 10.0.0.9"}, "private_address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.dns.Add(t, tc.records...)
			target := tc.host + ":" + port
			_, _, resp := e.rawConnect("CONNECT " + target + " HTTP/1.1\r\n\r\n")
			if resp.Header.Get(ReasonHeader) != tc.reason {
				t.Fatalf("got %d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
			}
			e.log.waitEvent(t, map[string]any{"event": "connect", "reason": tc.reason, "host": tc.host})
		})
	}
}

func TestCNAMEToPublicTargetIsFollowedAndLogged(t *testing.T) {
	e := newEnv(t)
	e.dns.Add(t, "alias.cdn.allowed.example. 60 IN CNAME edge.cdn-provider.example.", "edge.cdn-provider.example. 60 IN A "+e.origin.Addr.Addr().String())
	c := e.client()
	defer c.CloseIdleConnections()
	// The origin's certificate covers *.cdn.allowed.example.
	resp, err := c.Get(e.originURL("alias.cdn.allowed.example", "/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ev := e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "allow", "host": "alias.cdn.allowed.example"})
	if cn, _ := ev["cname"].([]any); len(cn) != 1 || cn[0] != "edge.cdn-provider.example" {
		t.Fatalf("cname chain not logged: %v", ev)
	}
}

func TestDeniedNameIsNeverResolved(t *testing.T) {
	e := newEnv(t)
	_, _, resp := e.rawConnect("CONNECT secret-data.evil.example:443 HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 403 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	e.log.waitEvent(t, map[string]any{"reason": "not_allowlisted", "host": "secret-data.evil.example"})
	if n := e.dns.Questions("secret-data.evil.example"); n != 0 {
		t.Fatalf("denied name reached DNS %d times", n)
	}
}

func TestDNSFailuresAreDNSError(t *testing.T) {
	e := newEnv(t)
	port := itoa(e.origin.Addr.Port())
	e.dns.SetHandler(func(w dns.ResponseWriter, r *dns.Msg) bool {
		m := new(dns.Msg)
		switch {
		case strings.HasPrefix(r.Question[0].Name, "servfail."):
			m.SetRcode(r, dns.RcodeServerFailure)
		case strings.HasPrefix(r.Question[0].Name, "wrongq."):
			m.SetReply(r)
			m.Question[0].Name = "other.example."
		default:
			return false
		}
		w.WriteMsg(m)
		return true
	})
	for _, host := range []string{"servfail.cdn.allowed.example", "wrongq.cdn.allowed.example"} {
		_, _, resp := e.rawConnect("CONNECT " + host + ":" + port + " HTTP/1.1\r\n\r\n")
		if resp.StatusCode != 502 || resp.Header.Get(ReasonHeader) != "dns_error" {
			t.Fatalf("%s: %d %s", host, resp.StatusCode, resp.Header.Get(ReasonHeader))
		}
	}
}

func TestTruncatedAnswerFallsBackToTCP(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("big.cdn.allowed.example")
	e.dns.SetHandler(func(w dns.ResponseWriter, r *dns.Msg) bool {
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp && strings.HasPrefix(r.Question[0].Name, "big.") {
			m := new(dns.Msg)
			m.SetReply(r)
			m.Truncated = true
			w.WriteMsg(m)
			return true
		}
		return false
	})
	c := e.client()
	defer c.CloseIdleConnections()
	resp, err := c.Get(e.originURL("big.cdn.allowed.example", "/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func TestDialErrorWhenOriginRefuses(t *testing.T) {
	e := newEnv(t)
	ln, _ := net.Listen("tcp", "127.0.0.2:0")
	port := itoa(uint16(ln.Addr().(*net.TCPAddr).Port))
	ln.Close() // nothing listens there now
	e.resolveToOrigin("gone.cdn.allowed.example")
	e.cfg.Integrations[0].Exemptions.AllowPorts = append(e.cfg.Integrations[0].Exemptions.AllowPorts, uint16(ln.Addr().(*net.TCPAddr).Port))
	e.registry.Load(e.cfg)
	_, _, resp := e.rawConnect("CONNECT gone.cdn.allowed.example:" + port + " HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 502 || resp.Header.Get(ReasonHeader) != "dial_error" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
	}
	e.log.waitEvent(t, map[string]any{"reason": "dial_error", "host": "gone.cdn.allowed.example"})
}

func TestEverythingButConnectIs405(t *testing.T) {
	e := newEnv(t, withFoldWindow(time.Hour)) // the four requests fold however slowly they run
	cases := []struct{ name, head string }{
		{"absolute_form_get", "GET http://api.allowed.example/ HTTP/1.1\r\nHost: api.allowed.example\r\n\r\n"},
		{"origin_form_get", "GET / HTTP/1.1\r\nHost: " + "proxy\r\n\r\n"},
		{"options_asterisk", "OPTIONS * HTTP/1.1\r\nHost: proxy\r\n\r\n"},
		{"absolute_form_post", "POST http://api.allowed.example/x HTTP/1.1\r\nHost: api.allowed.example\r\nContent-Length: 0\r\n\r\n"},
		// A body declared and never sent: net/http waited for it after the
		// 405, holding the handshake slot past every timeout (round 3).
		{"get_declaring_an_unsent_body", "GET http://api.allowed.example/held HTTP/1.1\r\nHost: api.allowed.example\r\nContent-Length: 1000\r\n\r\n"},
		{"origin_form_chunked_never_ending", "POST /held HTTP/1.1\r\nHost: proxy\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(c, tc.head)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 405 || resp.Header.Get(ReasonHeader) != "method_not_allowed" {
				t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
			}
			io.Copy(io.Discard, resp.Body)
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("connection left open after 405: %v", err)
			}
		})
	}
	// Each 405 asked for a different target: each is its own line, none is
	// folded away (folding keeps distinct targets).
	e.log.waitEvent(t, map[string]any{"reason": "method_not_allowed", "method": "GET", "host_raw": "http://api.allowed.example/"})
	e.log.waitEvent(t, map[string]any{"reason": "method_not_allowed", "method": "POST", "host_raw": "http://api.allowed.example/x"})
}

func TestKeepAliveAfterDenialIsNotServed(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	good := "api.allowed.example:" + itoa(e.origin.Addr.Port())
	c, br, resp := e.rawConnect("CONNECT evil.example:443 HTTP/1.1\r\n\r\nCONNECT " + good + " HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 403 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	io.Copy(io.Discard, resp.Body)
	_ = c
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("a second request was answered after a denial: %v", err)
	}
	for _, ev := range e.log.events(t) {
		if ev["host"] == "api.allowed.example" {
			t.Fatalf("the pipelined second CONNECT was decided: %v", ev)
		}
	}
}

func TestSlowlorisHeadersAreCutOffAndCounted(t *testing.T) {
	e := newEnv(t, withConfig(func(c *policy.Config) { c.Timeouts.RequestHeader = 300 * time.Millisecond }))
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT api.allowed.example:443 HTTP/1.1\r\nX-Slow: ")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	for {
		if _, err := c.Read(buf); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("slow client was not cut off")
			}
			break
		}
	}
	e.log.waitEvent(t, map[string]any{"event": "connect", "reason": "bad_request", "host": "api.allowed.example", "msg": "connection closed before a complete request (malformed, headers too large, or too slow)"})
}

func TestHugeHeadersAreRefused(t *testing.T) {
	e := newEnv(t)
	c, br, _ := func() (net.Conn, *bufio.Reader, error) {
		c, err := net.Dial("tcp", e.addr)
		return c, bufio.NewReader(c), err
	}()
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "CONNECT api.allowed.example:443 HTTP/1.1\r\nX-Big: "+strings.Repeat("a", 16<<10)+"\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 431 || resp.Header.Get(ReasonHeader) != "bad_request" {
		t.Fatalf("status %d %v", resp.StatusCode, resp.Header)
	}
	e.log.waitEvent(t, map[string]any{"reason": "bad_request", "host": "api.allowed.example", "msg": "request headers over egressd's limit"})
}

func TestMalformedTargetsAre400WithoutEcho(t *testing.T) {
	e := newEnv(t)
	for _, target := range []string{"%E2%91%A0.allowed.example:443", "api.allowed.example:0443", "user@api.allowed.example:443", "[fe80::1%25eth0]:443", "api.allowed.example:", "*:443"} {
		_, _, resp := e.rawConnect("CONNECT " + target + " HTTP/1.1\r\n\r\n")
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 400 || resp.Header.Get(ReasonHeader) != "bad_request" || strings.Contains(string(body), target) {
			t.Fatalf("%s: %d %q", target, resp.StatusCode, body)
		}
	}
}

func TestConnectionLimitIs503(t *testing.T) {
	e := newEnv(t, withConfig(func(c *policy.Config) { c.Limits.ConnectionsPerSecond, c.Limits.Burst = 0.001, 2 }))
	var statuses []int
	for i := 0; i < 4; i++ {
		_, _, resp := e.rawConnect("CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
		statuses = append(statuses, resp.StatusCode)
	}
	if statuses[0] != 403 || statuses[1] != 403 || statuses[2] != 503 || statuses[3] != 503 {
		t.Fatalf("statuses %v", statuses)
	}
	e.log.waitEvent(t, map[string]any{"reason": "limit_exceeded"})
}

func TestAuditUnavailableRefusesNewConnections(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	e.log.fail.Store(true)
	// The first connection's allow cannot be written: it must not run.
	pc := e.pipelined("api.allowed.example:" + itoa(e.origin.Addr.Port()))
	hello := buildHello(helloSpec{names: []string{"api.allowed.example"}})
	pc.Write(hello)
	if _, err := pc.Read(make([]byte, 1)); err == nil {
		t.Fatal("a tunnel ran without an audit record")
	}
	_, _, resp := e.rawConnect("CONNECT api.allowed.example:" + itoa(e.origin.Addr.Port()) + " HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 503 || resp.Header.Get(ReasonHeader) != "audit_unavailable" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
	}
}

// TestDeniedClientsThatNeverCloseCannotExhaustHandshakes: a refused client
// that keeps its socket open must not hold one of the few handshake slots
// while egressd lingers to deliver the refusal (found by the soak test).
func TestDeniedClientsThatNeverCloseCannotExhaustHandshakes(t *testing.T) {
	e := newEnv(t, withConfig(func(c *policy.Config) {
		c.Limits.ConnectionsPerSecond, c.Limits.Burst, c.Limits.MaxHandshakes = 1e9, 1<<30, 2
	}))
	for i := 0; i < 20; i++ {
		_, _, resp := e.rawConnect("CONNECT evil.example:443 HTTP/1.1\r\n\r\n") // held open until the test ends
		if resp.StatusCode != 403 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, resp.Header.Get(ReasonHeader))
		}
	}
}
