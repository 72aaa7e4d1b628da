package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy/broker"
	"github.com/egressd/egressd/proxy/proxytest"
)

// heldBrokered is one brokered connection a test keeps open: a transport
// of its own, so each holds exactly one connection to the proxy.
type heldBrokered struct {
	tr   *http.Transport
	conn string // the tunnel's conn id in the audit log
}

// holdBrokered opens one brokered connection to api.allowed.example with a
// real net/http client (HTTP/2 when h2), sends one request through it and
// keeps the connection alive.
func (b *brokerEnv) holdBrokered(t *testing.T, h2 bool) *heldBrokered {
	t.Helper()
	h, resp, body := b.openBrokered(t, h2)
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("brokered request: %d %q", resp.StatusCode, body)
	}
	if (resp.ProtoMajor == 2) != h2 {
		t.Fatalf("brokered request spoke %s, want HTTP/2 %v", resp.Proto, h2)
	}
	return h
}

// openBrokered is holdBrokered whatever the answer.
func (b *brokerEnv) openBrokered(t *testing.T, h2 bool) (*heldBrokered, *http.Response, string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.bca.CertPEM())
	tr := &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: b.addr}),
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: h2,
		MaxConnsPerHost:   1,
	}
	t.Cleanup(tr.CloseIdleConnections) // before the proxy's shutdown
	req := b.credentialRequest(t, "api.allowed.example")
	resp, body := do(t, &http.Client{Timeout: 10 * time.Second, Transport: tr}, req)
	// The connect line of this tunnel is the newest allow for the host.
	var conn string
	for _, e := range b.log.events(t) {
		if e["event"] == "connect" && e["decision"] == "allow" && e["host"] == "api.allowed.example" {
			conn, _ = e["conn"].(string)
		}
	}
	if conn == "" {
		t.Fatalf("no connect line for the brokered connection:\n%s", b.log)
	}
	return &heldBrokered{tr: tr, conn: conn}, resp, body
}

// closeAndWait closes the client's side of h and waits for the tunnel's
// close line, which is written once its brokered slot is free.
func (b *brokerEnv) closeAndWait(t *testing.T, h *heldBrokered) {
	t.Helper()
	h.tr.CloseIdleConnections()
	b.log.waitEvent(t, map[string]any{"event": "close", "conn": h.conn})
}

// wantBrokeredCapRefusal sends one more CONNECT to the bound host and
// wants it refused before the 200, with the reason and a sentence naming
// the limit and its value, and audited.
func (b *brokerEnv) wantBrokeredCapRefusal(t *testing.T, max int) {
	t.Helper()
	target := "api.allowed.example:" + itoa(b.origin.addr.Port())
	_, br, resp := b.rawConnect("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
	body, _ := io.ReadAll(io.LimitReader(br, 4096))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(ReasonHeader) != string(policy.LimitExceeded) {
		t.Fatalf("CONNECT past the brokered cap: %d %q %q, want 503 limit_exceeded", resp.StatusCode, resp.Header.Get(ReasonHeader), body)
	}
	if want := "limits.max_brokered_connections (" + itoa(uint16(max)) + ")"; !strings.Contains(string(body), want) {
		t.Fatalf("refusal %q does not name %s", body, want)
	}
	b.log.waitEvent(t, map[string]any{"event": "connect", "decision": "deny", "reason": "limit_exceeded", "host": "api.allowed.example"})
}

// TestIntegrationHoldingItsBrokeredCapCannotOpenAnotherButSplicesAndOtherIntegrationsStillWork:
// a hostile integration opens brokered connections (real h1 and h2
// clients, TLS terminated by egressd) up to limits.max_brokered_connections
// and asks for one more: it is refused at CONNECT time, 503
// limit_exceeded with a sentence naming the limit, and audited. A host
// with no secret still splices for it, another integration still gets its
// brokered connections, and closing one of its own frees a slot.
func TestIntegrationHoldingItsBrokeredCapCannotOpenAnotherButSplicesAndOtherIntegrationsStillWork(t *testing.T) {
	const max = 2
	hostile := newBrokerEnv(t, true, nil, withFoldWindow(time.Hour), withConfig(func(c *policy.Config) {
		c.Limits.MaxBrokeredConnections = max
	}))
	neighbour := newBrokerEnv(t, true, nil, withConfig(func(c *policy.Config) {
		c.Limits.MaxBrokeredConnections = max
	}))

	first := hostile.holdBrokered(t, false)
	hostile.holdBrokered(t, true)
	hostile.wantBrokeredCapRefusal(t, max)

	// A spliced tunnel is not a brokered one: it still opens, and shows
	// the origin's own certificate.
	spliced, body := do(t, hostile.client(true), mustRequest(t, "GET", hostile.url("x.cdn.allowed.example", "/"), ""))
	if spliced.StatusCode != 200 || body != "ok" || issuedBy(t, spliced, brokerCert(t, hostile.bca)) {
		t.Fatalf("spliced host past the brokered cap: %d %q", spliced.StatusCode, body)
	}

	// Another integration's brokered connections are its own to count.
	for _, h2 := range []bool{false, true} {
		neighbour.holdBrokered(t, h2)
	}

	hostile.closeAndWait(t, first)
	hostile.holdBrokered(t, false)
	hostile.wantBrokeredCapRefusal(t, max)
}

// TestBrokeredSlotIsFreedWhenAReloadClosesTheConnection: a reload that
// changes the secrets closes the integration's brokered connections; each
// gives its slot back, so the integration is not locked out of its bound
// host for good by connections egressd itself ended.
func TestBrokeredSlotIsFreedWhenAReloadClosesTheConnection(t *testing.T) {
	b := newBrokerEnv(t, false, nil, withFoldWindow(time.Hour), withConfig(func(c *policy.Config) {
		c.Limits.MaxBrokeredConnections = 1
	}))
	held := b.holdBrokered(t, false)
	b.wantBrokeredCapRefusal(t, 1)

	// The reload binds nothing: the tunnel may not stay open with its
	// secrets, and closes.
	if outs := b.registry.Load(b.cfg); outs[0].Result == "" {
		t.Fatalf("reload: %+v", outs)
	}
	b.srv.Redecide()
	b.log.waitEvent(t, map[string]any{"event": "close", "conn": held.conn, "reason": "policy_narrowed"})
	if got := b.srv.limiter.brokered.Load(); got != 0 {
		t.Fatalf("after the reload closed the only brokered connection, %d are counted", got)
	}
}

// TestBrokeredSlotIsFreedWhenTheOriginFailsVerification: a brokered
// connection that ends in an error (the origin's certificate does not
// verify, so nothing is sent) gives its slot back; a hostile integration
// cannot fill the cap with connections that failed.
func TestBrokeredSlotIsFreedWhenTheOriginFailsVerification(t *testing.T) {
	bca, err := broker.NewEphemeralCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The broker trusts another CA than the one that signed the origin.
	b := newBrokerEnvWith(t, bca, proxytest.NewCA(t).Pool, false, nil, withConfig(func(c *policy.Config) {
		c.Limits.MaxBrokeredConnections = 1
	}))
	for i := range 3 {
		h, resp, _ := b.openBrokered(t, i%2 == 1)
		if resp.Header.Get(ReasonHeader) != string(policy.UpstreamUnverified) {
			t.Fatalf("attempt %d: %d %q, want upstream_unverified (not a full cap)", i, resp.StatusCode, resp.Header.Get(ReasonHeader))
		}
		b.closeAndWait(t, h)
	}
	if n := len(b.origin.requests()); n != 0 {
		t.Fatalf("the unverifiable origin received %d requests", n)
	}
}

// TestBrokeredSlotIsFreedWhenTheClientNeverSpeaksTLS: a CONNECT to a
// bound host answered 200, then refused before egressd terminates TLS (no
// ClientHello: plain HTTP, or a hello naming another host), gives its slot
// back; refusals before the hand-off cannot use up the cap.
func TestBrokeredSlotIsFreedWhenTheClientNeverSpeaksTLS(t *testing.T) {
	b := newBrokerEnv(t, false, nil, withFoldWindow(time.Hour), withConfig(func(c *policy.Config) {
		c.Limits.MaxBrokeredConnections = 1
	}))
	target := "api.allowed.example:" + itoa(b.origin.addr.Port())
	for i := range 3 {
		c, _, resp := b.rawConnect("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("attempt %d: CONNECT to the bound host: %d %q", i, resp.StatusCode, resp.Header.Get(ReasonHeader))
		}
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.allowed.example\r\n\r\n")
		io.Copy(io.Discard, c) // egressd closes it
		c.Close()
	}
	b.srv.opts.Suppress.Flush(true)
	b.log.waitEvent(t, map[string]any{"event": "connect", "decision": "deny", "reason": "not_tls", "host": "api.allowed.example"})
	b.holdBrokered(t, false)
}

// TestReloadedBrokeredCapAppliesToNewConnections: a reload that lowers
// limits.max_brokered_connections refuses the next connection past it and
// leaves those open; one that raises it admits the next.
func TestReloadedBrokeredCapAppliesToNewConnections(t *testing.T) {
	b := newBrokerEnv(t, false, nil, withFoldWindow(time.Hour), withConfig(func(c *policy.Config) {
		c.Limits.MaxBrokeredConnections = 3
	}))
	first := b.holdBrokered(t, false)
	b.holdBrokered(t, true)
	lower := b.cfg.Limits
	lower.MaxBrokeredConnections = 1
	b.srv.Apply(lower, b.cfg.Timeouts, b.cfg.Audit.OnFailure)
	b.wantBrokeredCapRefusal(t, 1)
	// The connections already open stay, and keep serving.
	if resp, _ := do(t, &http.Client{Timeout: 10 * time.Second, Transport: first.tr}, b.credentialRequest(t, "api.allowed.example")); resp.StatusCode != 200 {
		t.Fatalf("an open brokered connection after the cap was lowered: %d", resp.StatusCode)
	}
	higher := b.cfg.Limits
	higher.MaxBrokeredConnections = 3
	b.srv.Apply(higher, b.cfg.Timeouts, b.cfg.Audit.OnFailure)
	b.holdBrokered(t, false)
}

// TestBrokeredCapOfZeroAdmitsNoneAndCountsNothing: a Server given limits
// with no brokered cap (a caller that built policy.Limits by hand) refuses
// every brokered connection, fails closed, and its count stays at zero:
// the refusal is not mistaken for an admission.
func TestBrokeredCapOfZeroAdmitsNoneAndCountsNothing(t *testing.T) {
	b := newBrokerEnv(t, false, nil, withFoldWindow(time.Hour), withConfig(func(c *policy.Config) {
		c.Limits.MaxBrokeredConnections = 0
	}))
	b.wantBrokeredCapRefusal(t, 0)
	b.wantBrokeredCapRefusal(t, 0)
	if got := b.srv.limiter.brokered.Load(); got != 0 {
		t.Fatalf("after two refusals %d brokered connections are counted", got)
	}
}
