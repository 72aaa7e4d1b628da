package proxy

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
	"github.com/miekg/dns"
)

// startSandboxDNS serves the sandbox resolver for e's integration on a
// loopback port.
func startSandboxDNS(t *testing.T, e *env, names *Synthetic) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	srv := (&SandboxDNS{Server: e.srv, Synthetic: names, TTL: 30}).UDPServer(pc)
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}

func ask(t *testing.T, server, name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := new(dns.Client).Exchange(m, server)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSandboxDNSAnswersOnlyAllowedNamesAndNeverForwards(t *testing.T) {
	e := newEnv(t)
	names := NewSynthetic(100, time.Minute)
	server := startSandboxDNS(t, e, names)

	a1 := ask(t, server, "api.allowed.example", dns.TypeA)
	a2 := ask(t, server, "API.allowed.example", dns.TypeA)
	if a1.Rcode != dns.RcodeSuccess || len(a1.Answer) != 1 || a1.Answer[0].(*dns.A).A.String() != a2.Answer[0].(*dns.A).A.String() {
		t.Fatalf("allowed name: %v / %v", a1, a2)
	}
	if ip := a1.Answer[0].(*dns.A).A.String(); !SyntheticPrefix.Contains(mustAddr(t, ip)) {
		t.Fatalf("answer %s outside the synthetic range", ip)
	}
	for _, qt := range []uint16{dns.TypeAAAA, dns.TypeHTTPS, dns.TypeTXT, dns.TypeANY} {
		if r := ask(t, server, "api.allowed.example", qt); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
			t.Errorf("type %s: want NODATA, got %v", dns.TypeToString[qt], r)
		}
	}
	for _, n := range []string{"evil.example", "exfil-c2VjcmV0.evil.example", "169.254.169.254", "localhost"} {
		if r := ask(t, server, n, dns.TypeA); r.Rcode != dns.RcodeNameError {
			t.Errorf("%s: want NXDOMAIN, got %s", n, dns.RcodeToString[r.Rcode])
		}
	}
	e.log.waitEvent(t, map[string]any{"event": "dns", "decision": "deny", "reason": "not_allowlisted", "host": "exfil-c2vjcmv0.evil.example"})
	e.log.waitEvent(t, map[string]any{"event": "dns", "decision": "deny", "reason": "ip_literal"})
	for _, n := range []string{"api.allowed.example", "evil.example", "exfil-c2VjcmV0.evil.example"} {
		if e.dns.Questions(n) != 0 {
			t.Errorf("%s was forwarded upstream", n)
		}
	}
}

func TestSandboxDNSInAuditModeNamesEverything(t *testing.T) {
	e := newEnv(t, withConfig(func(c *policy.Config) { c.Integrations[0].Exemptions.Mode = policy.Audit }))
	server := startSandboxDNS(t, e, NewSynthetic(100, time.Minute))
	if r := ask(t, server, "unlisted.example", dns.TypeA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("audit mode: %v", r)
	}
	e.log.waitEvent(t, map[string]any{"event": "dns", "decision": "would_deny", "host": "unlisted.example"})
	if r := ask(t, server, "10.0.0.1", dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Fatal("audit mode named an IP literal")
	}
}

func TestSyntheticTableIsBoundedAndEvictsOnlyIdleEntries(t *testing.T) {
	s := NewSynthetic(2, time.Minute)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	n := func(h string) allowlist.Name { return mustWire(t, h) }
	a, _ := s.Assign(n("a.example"))
	s.Assign(n("b.example"))
	if _, ok := s.Assign(n("c.example")); ok {
		t.Fatal("assigned past the bound while every entry was fresh")
	}
	now = now.Add(2 * time.Minute)
	s.Assign(n("b.example")) // used again: a is now the idle one
	c, ok := s.Assign(n("c.example"))
	if !ok || c != a {
		t.Fatalf("c got %v %v, want a's address %v", c, ok, a)
	}
	if _, ok := s.Lookup(a); !ok {
		t.Fatal("c's address does not map back")
	}
	if name, _ := s.Lookup(c); name != n("c.example") {
		t.Fatalf("address maps to %v", name)
	}
}

func TestCapturedConnectionGetsTheSameChecks(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	names := NewSynthetic(100, time.Minute)
	addr, _ := names.Assign(mustWire(t, "api.allowed.example"))
	port := itoa(e.origin.Addr.Port())
	ln, err := net.Listen("tcp", addr.String()+":"+port)
	if err != nil {
		t.Fatal(err)
	}
	go e.srv.ServeCaptured(ln, names)

	// A program that ignores proxy settings connects to the synthetic address.
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: "api.allowed.example", RootCAs: e.ca.Pool})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	e.log.waitEvent(t, map[string]any{"event": "connect", "method": "captured", "decision": "allow", "host": "api.allowed.example"})

	// SNI for another host on the same synthetic address: refused.
	if c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{ServerName: "other.allowed.example", RootCAs: e.ca.Pool}); err == nil {
		c.Close()
		t.Fatal("SNI mismatch on the capture path was tunnelled")
	}
	e.log.waitEvent(t, map[string]any{"method": "captured", "reason": "sni_mismatch"})

	// An address the sandbox DNS never handed out: refused.
	stray, err := net.Listen("tcp", "127.1.200.200:"+port)
	if err != nil {
		t.Fatal(err)
	}
	go e.srv.ServeCaptured(stray, names)
	if c, err := tls.Dial("tcp", stray.Addr().String(), &tls.Config{ServerName: "api.allowed.example", RootCAs: e.ca.Pool}); err == nil {
		c.Close()
		t.Fatal("connection to a stray address was tunnelled")
	}
	e.log.waitEvent(t, map[string]any{"method": "captured", "reason": "ip_literal", "host_raw": "127.1.200.200:" + port})
}

func mustAddr(t *testing.T, s string) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustWire(t testing.TB, s string) allowlist.Name {
	n, err := allowlist.ParseWireHost(s, allowlist.HostForm)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSandboxDNSFloodOfRandomSubdomainsIsBounded: random names under an
// allowed wildcard, at line rate, are refused past the integration's token
// bucket, the synthetic table stays bounded, and the audit log folds the
// refusals instead of growing a line per query.
func TestSandboxDNSFloodOfRandomSubdomainsIsBounded(t *testing.T) {
	e := newEnv(t, withConfig(func(c *policy.Config) { c.Limits.ConnectionsPerSecond, c.Limits.Burst = 1, 100 }))
	names := NewSynthetic(1000, time.Minute)
	server := startSandboxDNS(t, e, names)
	refused := 0
	start := time.Now()
	for i := 0; i < 2000; i++ {
		if r := ask(t, server, fmt.Sprintf("r%d.cdn.allowed.example", i), dns.TypeA); r.Rcode == dns.RcodeRefused {
			refused++
		}
	}
	if refused < 1800 {
		t.Fatalf("only %d of 2000 flood queries refused", refused)
	}
	if n := len(names.byName); n > 150 {
		t.Fatalf("synthetic table grew to %d names", n)
	}
	// A one-second fold window starts at most once per second of flood: the
	// bound is per window (4 distinct names written, one summary), so a
	// loaded machine that stretches the flood does not break it.
	windows := int(time.Since(start)/time.Second) + 1
	e.srv.opts.Suppress.Flush(true)
	lines, stands := 0, int64(0)
	for _, ev := range e.log.events(t) {
		if ev["reason"] == "limit_exceeded" {
			lines++
			stands += foldedCount(ev)
		}
	}
	if lines > 5*windows || stands != int64(refused) {
		t.Fatalf("%d audit lines over %d window(s) standing for %d refusals; %d were refused", lines, windows, stands, refused)
	}
}

// TestSandboxDNSOverTCPBoundsConnectionsAndMessageSizes: the TCP server of
// the sandbox resolver keeps at most MaxSandboxDNSConns connections (the
// next is closed at accept and audited), closes a connection that declares
// a message over MaxDNSQueryBytes before reading or allocating it, answers
// a query padded to exactly the bound, and shuts down while the program
// still holds its connections.
func TestSandboxDNSOverTCPBoundsConnectionsAndMessageSizes(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := (&SandboxDNS{Server: e.srv, Synthetic: NewSynthetic(100, time.Minute), TTL: 30}).TCPServer(ln)
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	addr := ln.Addr().String()
	closedByServer := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(30 * time.Second)) // bounds a failure only
		_, err := c.Read(make([]byte, 1))
		return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
	}

	// A query padded with EDNS0 to exactly MaxDNSQueryBytes is answered.
	q := new(dns.Msg)
	q.SetQuestion("api.allowed.example.", dns.TypeA)
	q.SetEdns0(1232, false)
	opt := q.IsEdns0()
	opt.Option = append(opt.Option, &dns.EDNS0_PADDING{Padding: make([]byte, 0)})
	if packed, _ := q.Pack(); len(packed) < MaxDNSQueryBytes {
		opt.Option[0].(*dns.EDNS0_PADDING).Padding = make([]byte, MaxDNSQueryBytes-len(packed))
	}
	if packed, _ := q.Pack(); len(packed) != MaxDNSQueryBytes {
		t.Fatalf("padded query is %d bytes", len(packed))
	}
	client := &dns.Client{Net: "tcp", Timeout: 30 * time.Second}
	if r, _, err := client.Exchange(q, addr); err != nil || len(r.Answer) != 1 {
		t.Fatalf("a query of %d bytes: %v %v", MaxDNSQueryBytes, r, err)
	}

	// One byte over: closed after the length, nothing more read.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(binary.BigEndian.AppendUint16(nil, MaxDNSQueryBytes+1))
	if !closedByServer(c) {
		t.Fatal("a connection declaring a message over the bound stayed open")
	}
	c.Close()
	e.log.waitEvent(t, map[string]any{"event": "dns", "reason": "limit_exceeded", "msg": "DNS connection closed: it declared a message over 4096 bytes"})

	// MaxSandboxDNSConns held open: the next is closed at accept.
	var held []net.Conn
	for i := 0; i < MaxSandboxDNSConns; i++ {
		c, err := client.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := exchangeOn(c, "api.allowed.example."); err != nil || len(r.Answer) != 1 { // admitted, and served
			t.Fatalf("connection %d: %v %v", i, r, err)
		}
		held = append(held, c)
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if !closedByServer(extra) {
		t.Fatalf("connection %d was kept", MaxSandboxDNSConns+1)
	}
	extra.Close()
	e.log.waitEvent(t, map[string]any{"event": "dns", "reason": "limit_exceeded", "msg": "DNS connection closed at accept: the sandbox's DNS-over-TCP connections are at 64"})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.ShutdownContext(ctx); err != nil {
		t.Fatalf("shutdown with %d connections held: %v", len(held), err)
	}
	for _, c := range held {
		c.Close()
	}
}

func exchangeOn(c *dns.Conn, name string) (*dns.Msg, error) {
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := c.WriteMsg(q); err != nil {
		return nil, err
	}
	return c.ReadMsg()
}
