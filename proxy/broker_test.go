package proxy

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/textproto"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy/broker"
	"github.com/egressd/egressd/proxy/proxytest"
)

// The secrets of the brokering tests: TOKEN bound to api.allowed.example,
// OTHER to other.allowed.example; *.cdn.allowed.example is allowed and
// bound to nothing.
const (
	tokenPH    = "egressd-ph-T0kenPlaceholderAAAAAAAAAAAA"
	tokenValue = "sk-live-REAL-token-value-0123456789"
	otherPH    = "egressd-ph-0therPlaceholderBBBBBBBBBBBB"
	otherValue = "other-REAL-secret-value-abcdef"
)

func testSecrets(t testing.TB) []policy.Secret {
	entry := func(s string) []allowlist.Entry {
		e, _, err := allowlist.ParseEntry(s)
		if err != nil {
			t.Fatal(err)
		}
		return []allowlist.Entry{e}
	}
	return []policy.Secret{
		{Name: "TOKEN", Hosts: entry("api.allowed.example"), Placeholder: tokenPH, Value: []byte(tokenValue)},
		{Name: "OTHER", Hosts: entry("other.allowed.example"), Placeholder: otherPH, Value: []byte(otherValue)},
	}
}

// withBroker gives the proxy a broker CA that trusts upstream, and binds
// secrets into the policy once loaded.
func withBroker(ca *broker.CA, upstream *x509.CertPool, secrets []policy.Secret) envOption {
	return func(e *env) {
		if ca != nil {
			e.broker = &BrokerOptions{CA: ca, UpstreamRoots: upstream}
		}
		e.secrets = secrets
	}
}

// bindSecrets rebuilds the loaded policy with e.secrets, as the config's
// bindings would (b15wire wires them from run and serve); called before
// the proxy serves, so nothing reads the snapshot yet.
func (e *env) bindSecrets() {
	if e.secrets == nil {
		return
	}
	snap := e.registry.Snapshot()
	old := snap.Policies[e.dir]
	in := e.cfg.Integrations[0]
	p := policy.NewPolicy(old.Manifest, old.Entries(), policy.PolicyOptions{
		Exemptions: in.Exemptions, Deny: e.cfg.Deny, NAT64: e.cfg.NAT64, Host: e.registry.HostAddrs(), Secrets: e.secrets,
	})
	p.ManifestAt, p.Generation = old.ManifestAt, old.Generation
	snap.Policies[e.dir] = p
}

// recOrigin is a real TLS origin on loopback that records every request it
// receives (its header, host and protocol) before answering with handle.
type recOrigin struct {
	addr netip.AddrPort
	ca   *proxytest.CA
	mu   sync.Mutex
	reqs []*http.Request
	// remotes are the client addresses of the connections it accepted.
	remotes map[string]bool
	// accepted counts every TCP connection accepted, requests or not.
	accepted atomic.Int32
}

func startRecOrigin(t testing.TB, ca *proxytest.CA, h2 bool, handle http.HandlerFunc) *recOrigin {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &recOrigin{addr: netip.MustParseAddrPort(ln.Addr().String()), ca: ca, remotes: map[string]bool{}}
	srv := &http.Server{
		ErrorLog:  log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, "api.allowed.example", "other.allowed.example", "*.cdn.allowed.example")}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			o.mu.Lock()
			o.reqs = append(o.reqs, r.Clone(context.Background()))
			o.remotes[r.RemoteAddr] = true
			o.mu.Unlock()
			if handle != nil {
				handle(w, r)
				return
			}
			io.WriteString(w, "ok")
		}),
	}
	if !h2 {
		srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){} // HTTP/1.1 only
	}
	go srv.ServeTLS(countingListener{Listener: ln, n: &o.accepted}, "", "")
	t.Cleanup(func() { srv.Close() })
	return o
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// conns is how many connections the origin accepted requests on.
func (o *recOrigin) conns() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.remotes)
}

func (o *recOrigin) requests() []*http.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*http.Request(nil), o.reqs...)
}

// brokerEnv is a proxy with a broker whose origins verify against the test
// CA, the secrets bound, and o reachable by every test name.
type brokerEnv struct {
	*env
	bca    *broker.CA
	origin *recOrigin
}

func newBrokerEnv(t testing.TB, h2Origin bool, handle http.HandlerFunc, opts ...envOption) *brokerEnv {
	bca, err := broker.NewEphemeralCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return newBrokerEnvWith(t, bca, nil, h2Origin, handle, opts...)
}

// newBrokerEnvWith verifies origins against roots (nil: the recording
// origin's own CA, so it verifies); bca nil means no broker.
func newBrokerEnvWith(t testing.TB, bca *broker.CA, roots *x509.CertPool, h2Origin bool, handle http.HandlerFunc, opts ...envOption) *brokerEnv {
	o := startRecOrigin(t, proxytest.NewCA(t), h2Origin, handle)
	if roots == nil {
		roots = o.ca.Pool
	}
	opts = append([]envOption{
		withConfig(func(c *policy.Config) {
			c.Integrations[0].Exemptions.AllowPorts = append(c.Integrations[0].Exemptions.AllowPorts, o.addr.Port())
		}),
		withBroker(bca, roots, testSecrets(t)),
	}, opts...)
	e := newEnv(t, opts...)
	e.resolveToOrigin("api.allowed.example", "other.allowed.example", "x.cdn.allowed.example")
	return &brokerEnv{env: e, bca: bca, origin: o}
}

// client trusts the broker's CA and the origin's, and speaks HTTP/2 when h2.
func (b *brokerEnv) client(h2 bool) *http.Client {
	pool := x509.NewCertPool()
	if b.bca != nil {
		pool.AppendCertsFromPEM(b.bca.CertPEM())
	}
	pool.AddCert(b.origin.ca.Cert)
	tr := &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: b.addr}),
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: h2,
	}
	b.t.Cleanup(tr.CloseIdleConnections) // before the proxy's shutdown, which waits for open tunnels
	return &http.Client{Timeout: 10 * time.Second, Transport: tr}
}

// issuedBy reports whether the server certificate the client saw was
// signed by the CA certificate in caPEM.
func issuedBy(t *testing.T, resp *http.Response, ca *x509.Certificate) bool {
	t.Helper()
	return resp.TLS.PeerCertificates[0].CheckSignatureFrom(ca) == nil
}

func brokerCert(t *testing.T, bca *broker.CA) *x509.Certificate {
	block, _ := pem.Decode(bca.CertPEM())
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (b *brokerEnv) url(host, path string) string {
	return "https://" + net.JoinHostPort(host, itoa(b.origin.addr.Port())) + path
}

// credentialRequest carries TOKEN's placeholder as a bearer token, in a
// custom header (twice, and adjacent) and inside a Basic credential.
func (b *brokerEnv) credentialRequest(t testing.TB, host string) *http.Request {
	req, err := http.NewRequest("GET", b.url(host, "/v1/items?key=q"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenPH)
	req.Header.Set("X-Api-Key", tokenPH+tokenPH)
	req.Header.Set("Proxy-Authorization-Like", "Basic "+base64.StdEncoding.EncodeToString([]byte("user:"+tokenPH)))
	return req
}

// noValueIn fails if a secret's real value appears in where.
func noValueIn(t *testing.T, what, where string) {
	t.Helper()
	for _, v := range []string{tokenValue, otherValue} {
		if strings.Contains(where, v) {
			t.Fatalf("%s holds a secret's real value: %q", what, where)
		}
	}
}

func do(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func wantSubstituted(t *testing.T, r *http.Request) {
	t.Helper()
	if got := r.Header.Get("Authorization"); got != "Bearer "+tokenValue {
		t.Errorf("origin's Authorization = %q, want the real bearer token", got)
	}
	if got := r.Header.Get("X-Api-Key"); got != tokenValue+tokenValue {
		t.Errorf("origin's X-Api-Key = %q, want the value twice", got)
	}
	basic := r.Header.Get("Proxy-Authorization-Like")
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(basic, "Basic "))
	if err != nil || string(raw) != "user:"+tokenValue {
		t.Errorf("origin's Basic credential decodes to %q (%v), want user:<value>", raw, err)
	}
}

func TestBrokerAddsTheSecretOnlyOnTheWayOutOverHTTP1(t *testing.T) {
	b := newBrokerEnv(t, false, nil)
	c := b.client(false)
	resp, body := do(t, c, b.credentialRequest(t, "api.allowed.example"))
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("status %d body %q", resp.StatusCode, body)
	}
	if again, _ := do(t, c, b.credentialRequest(t, "api.allowed.example")); again.StatusCode != 200 {
		t.Fatalf("second request: %d", again.StatusCode)
	}
	if n := b.origin.conns(); n != 1 {
		t.Fatalf("two requests on one keep-alive connection reached the origin on %d connections, want 1", n)
	}
	if !issuedBy(t, resp, brokerCert(t, b.bca)) {
		t.Fatal("the client did not see a leaf from egressd's broker CA")
	}
	reqs := b.origin.requests()
	if len(reqs) != 2 {
		t.Fatalf("origin received %d requests, want 2", len(reqs))
	}
	wantSubstituted(t, reqs[0])
	if reqs[0].URL.RawQuery != "key=q" {
		t.Errorf("the query was changed: %q", reqs[0].URL.RawQuery)
	}
	ev := b.log.waitEvent(t, map[string]any{"event": "request", "host": "api.allowed.example"})
	b.log.waitEvent(t, map[string]any{"event": "response", "conn": ev["conn"], "req": ev["req"], "host": "api.allowed.example", "status": 200})
	if ev["method"] != "GET" || ev["path"] != "/v1/items" || ev["decision"] != "allow" {
		t.Errorf("request event %v: want GET /v1/items (no query), allow", ev)
	}
	if names, _ := ev["secrets"].([]any); len(names) != 1 || names[0] != "TOKEN" {
		t.Errorf("request event secrets = %v, want [TOKEN]", ev["secrets"])
	}
	noValueIn(t, "the audit log", b.log.String())
}

func TestBrokerAddsTheSecretOverHTTP2(t *testing.T) {
	for _, originH2 := range []bool{false, true} {
		name := map[bool]string{false: "origin http1.1", true: "origin h2"}[originH2]
		t.Run(name, func(t *testing.T) {
			b := newBrokerEnv(t, originH2, nil)
			resp, body := do(t, b.client(true), b.credentialRequest(t, "api.allowed.example"))
			if resp.StatusCode != 200 || body != "ok" || resp.ProtoMajor != 2 {
				t.Fatalf("status %d proto %s body %q, want 200 over HTTP/2", resp.StatusCode, resp.Proto, body)
			}
			reqs := b.origin.requests()
			if len(reqs) != 1 {
				t.Fatalf("origin received %d requests", len(reqs))
			}
			if want := map[bool]int{false: 1, true: 2}[originH2]; reqs[0].ProtoMajor != want {
				t.Errorf("origin spoke HTTP/%d, want HTTP/%d", reqs[0].ProtoMajor, want)
			}
			wantSubstituted(t, reqs[0])
			b.log.waitEvent(t, map[string]any{"event": "response", "status": 200})
			noValueIn(t, "the audit log", b.log.String())
		})
	}
}

func TestBrokerLeavesAHostWithNoSecretSplicedAndUndecrypted(t *testing.T) {
	b := newBrokerEnv(t, false, nil)
	c := b.client(false)
	resp, _ := do(t, c, b.credentialRequest(t, "x.cdn.allowed.example"))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if !issuedBy(t, resp, b.origin.ca.Cert) {
		t.Fatal("the client did not see the origin's own certificate on an unbound host")
	}
	reqs := b.origin.requests()
	if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer "+tokenPH {
		t.Fatalf("an unbound host must receive the placeholder as sent; got %v", reqs)
	}
	c.CloseIdleConnections()
	b.log.waitEvent(t, map[string]any{"event": "close", "host": "x.cdn.allowed.example"})
	for _, ev := range b.log.events(t) {
		if ev["event"] == "request" {
			t.Fatalf("a spliced tunnel produced a request event: %v", ev)
		}
	}
}

// echoHandler sends the credentials it received back: in response headers,
// in a trailer, and in a body written in pieces that split the value.
func echoHandler(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	w.Header().Set("Link", "</x>; rel=preload; a=\""+auth+"\"")
	w.WriteHeader(http.StatusEarlyHints) // relayed by ReverseProxy without ModifyResponse
	w.Header().Del("Link")
	w.Header().Set("Trailer", "X-Echo-Trailer")
	w.Header().Set("X-Echo", auth)
	w.Header().Set("X-Echo-Basic", r.Header.Get("Proxy-Authorization-Like"))
	w.Header().Set("Content-Length", "") // let net/http frame it
	w.WriteHeader(200)
	body := "auth=" + auth + "; basic=" + r.Header.Get("Proxy-Authorization-Like") + "; key=" + r.Header.Get("X-Api-Key")
	for i := 0; i < len(body); i += 5 { // a value never arrives in one read
		end := min(i+5, len(body))
		io.WriteString(w, body[i:end])
		http.NewResponseController(w).Flush()
	}
	w.Header().Set("X-Echo-Trailer", auth)
}

func TestBrokerEchoingOriginDoesNotHandTheValueBack(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http1.1", true: "h2"}[h2], func(t *testing.T) {
			b := newBrokerEnv(t, h2, echoHandler)
			var hints strings.Builder
			req := b.credentialRequest(t, "api.allowed.example")
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					http.Header(h).Write(&hints)
					return nil
				},
			}))
			resp, body := do(t, b.client(h2), req)
			if !strings.Contains(hints.String(), tokenPH) {
				t.Fatalf("the 103 Early Hints did not reach the client with the placeholder: %q", hints.String())
			}
			noValueIn(t, "the 103 Early Hints", hints.String())
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			wantSubstituted(t, b.origin.requests()[0]) // the origin did see the value
			var all strings.Builder
			resp.Header.Write(&all)
			resp.Trailer.Write(&all)
			all.WriteString(body)
			noValueIn(t, "the response", all.String())
			basic := base64.StdEncoding.EncodeToString([]byte("user:" + tokenValue))
			if strings.Contains(all.String(), basic) {
				t.Fatalf("the response holds the Basic credential egressd encoded: %q", all.String())
			}
			if !strings.Contains(body, "auth=Bearer "+tokenPH) || resp.Header.Get("X-Echo") != "Bearer "+tokenPH || resp.Trailer.Get("X-Echo-Trailer") != "Bearer "+tokenPH {
				t.Fatalf("the echo should read back the placeholder; header %q trailer %q body %q", resp.Header.Get("X-Echo"), resp.Trailer.Get("X-Echo-Trailer"), body)
			}
			if !strings.Contains(body, "key="+tokenPH+tokenPH) {
				t.Fatalf("body %q: adjacent values not scrubbed back", body)
			}
		})
	}
}

func TestBrokerUnverifiableOriginGetsNothing(t *testing.T) {
	bca, err := broker.NewEphemeralCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The broker trusts another CA than the one that signed the origin.
	b := newBrokerEnvWith(t, bca, proxytest.NewCA(t).Pool, false, nil)
	resp, body := do(t, b.client(false), b.credentialRequest(t, "api.allowed.example"))
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(ReasonHeader) != string(policy.UpstreamUnverified) {
		t.Fatalf("status %d reason %q body %q, want 502 upstream_unverified", resp.StatusCode, resp.Header.Get(ReasonHeader), body)
	}
	if !strings.Contains(body, "could not be verified") {
		t.Errorf("body %q does not say what happened", body)
	}
	if n := len(b.origin.requests()); n != 0 {
		t.Fatalf("the unverifiable origin received %d requests", n)
	}
	b.log.waitEvent(t, map[string]any{"event": "request", "reason": "upstream_unverified", "decision": "deny", "status": 502})
	noValueIn(t, "the audit log", b.log.String())
}

func TestBrokerPlaceholderForAnotherHostIsRefused(t *testing.T) {
	b := newBrokerEnv(t, false, nil)
	for name, set := range map[string]func(*http.Request){
		"header": func(r *http.Request) { r.Header.Set("X-Leak", "Bearer "+otherPH) },
		"basic": func(r *http.Request) {
			r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:"+otherPH)))
		},
		"url": func(r *http.Request) { r.URL.RawQuery = "k=" + otherPH },
	} {
		t.Run(name, func(t *testing.T) {
			req := b.credentialRequest(t, "api.allowed.example")
			set(req)
			resp, body := do(t, b.client(false), req)
			if resp.StatusCode != 403 || resp.Header.Get(ReasonHeader) != string(policy.SecretMisdirected) {
				t.Fatalf("status %d reason %q body %q, want 403 secret_misdirected", resp.StatusCode, resp.Header.Get(ReasonHeader), body)
			}
		})
	}
	if n := len(b.origin.requests()); n != 0 {
		t.Fatalf("the origin received %d requests carrying another host's placeholder", n)
	}
	b.log.waitEvent(t, map[string]any{"event": "request", "reason": "secret_misdirected", "decision": "deny", "status": 403})
	noValueIn(t, "the audit log", b.log.String())
}

func TestBrokerRequestForAnotherHostOnTheConnectionIsRefused(t *testing.T) {
	b := newBrokerEnv(t, false, nil)
	for _, h2 := range []bool{false, true} {
		req := b.credentialRequest(t, "api.allowed.example")
		req.Host = "other.allowed.example" // the shared front end would route on it
		resp, body := do(t, b.client(h2), req)
		if resp.StatusCode != 403 || resp.Header.Get(ReasonHeader) != string(policy.HostMismatch) {
			t.Fatalf("h2=%v: status %d reason %q body %q, want 403 host_mismatch", h2, resp.StatusCode, resp.Header.Get(ReasonHeader), body)
		}
	}
	if n := len(b.origin.requests()); n != 0 {
		t.Fatalf("the origin received %d requests for another host", n)
	}
	b.log.waitEvent(t, map[string]any{"event": "request", "reason": "host_mismatch", "decision": "deny"})
	noValueIn(t, "the audit log", b.log.String())
}

func TestBrokerBoundHostWithoutABrokerIsRefusedNotSpliced(t *testing.T) {
	b := newBrokerEnvWith(t, nil, nil, false, nil)
	_, err := b.client(false).Do(b.credentialRequest(t, "api.allowed.example"))
	if err == nil {
		t.Fatal("a bound host was reached with no broker")
	}
	b.log.waitEvent(t, map[string]any{"event": "connect", "reason": "broker_unavailable", "decision": "deny"})
	if n := len(b.origin.requests()); n != 0 {
		t.Fatalf("the origin received %d requests", n)
	}
}

// TestBrokerRedialsOnlyThePinnedCheckedAddress: the origin closes every
// connection after one answer, so the broker must dial again for the
// second request on the client's keep-alive connection. The name now
// resolves to a documentation address; the new connection must go to the
// address checked at CONNECT, never to a fresh answer.
func TestBrokerRedialsOnlyThePinnedCheckedAddress(t *testing.T) {
	b := newBrokerEnv(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	})
	c := b.client(false)
	if resp, _ := do(t, c, b.credentialRequest(t, "api.allowed.example")); resp.StatusCode != 200 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	b.dns.Add(t, "api.allowed.example. 60 IN A 192.0.2.1")
	resp, _ := do(t, c, b.credentialRequest(t, "api.allowed.example"))
	if resp.StatusCode != 200 {
		t.Fatalf("second: %d", resp.StatusCode)
	}
	reqs := b.origin.requests()
	if len(reqs) != 2 || b.origin.conns() != 2 {
		t.Fatalf("origin saw %d requests on %d connections, want 2 on 2", len(reqs), b.origin.conns())
	}
	wantSubstituted(t, reqs[1])
	connects := 0
	for _, ev := range b.log.events(t) {
		if ev["event"] == "connect" {
			connects++
		}
	}
	if connects != 1 {
		t.Fatalf("%d CONNECTs: the client should have kept one connection", connects)
	}
}

func TestBrokerReloadThatUnbindsTheSecretClosesTheConnection(t *testing.T) {
	b := newBrokerEnv(t, false, nil)
	c := b.client(false)
	if resp, _ := do(t, c, b.credentialRequest(t, "api.allowed.example")); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// A reload from a config that binds nothing: the tunnel's secrets are
	// gone, so it may not stay open with them.
	if outs := b.registry.Load(b.cfg); outs[0].Result == "" {
		t.Fatalf("reload: %+v", outs)
	}
	b.srv.Redecide()
	b.log.waitEvent(t, map[string]any{"event": "close", "host": "api.allowed.example", "reason": "policy_narrowed"})
}

// TestBrokerIdleRequestOnARedialledConnectionIsSwept: the origin closes the
// pinned connection after one answer, then holds the second request (on a
// connection the broker dialled again) without a byte. The tunnel must
// still be closed as idle, as a spliced one would be.
func TestBrokerIdleRequestOnARedialledConnectionIsSwept(t *testing.T) {
	var calls sync.Mutex
	n := 0
	b := newBrokerEnv(t, false, func(w http.ResponseWriter, r *http.Request) {
		calls.Lock()
		n++
		first := n == 1
		calls.Unlock()
		if first {
			w.Header().Set("Connection", "close")
			io.WriteString(w, "ok")
			return
		}
		<-r.Context().Done() // hold the request, silent, until egressd gives up
	}, withConfig(func(c *policy.Config) { c.Timeouts.Idle = time.Second }))
	c := b.client(false)
	if resp, _ := do(t, c, b.credentialRequest(t, "api.allowed.example")); resp.StatusCode != 200 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := c.Do(b.credentialRequest(t, "api.allowed.example"))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	b.log.waitEvent(t, map[string]any{"event": "close", "host": "api.allowed.example", "reason": "timeout"})
	// (net/http retries the idempotent GET once on a new tunnel, which is
	// swept the same way.)
	if err := <-done; err == nil {
		t.Fatal("the held request got an answer after the tunnel was swept")
	}
}

// TestBrokerWebSocketUpgradePassesThroughWithTheSecret: the upgrade
// request gets the secret like any other; after the 101 the bytes flow
// both ways.
func TestBrokerWebSocketUpgradePassesThroughWithTheSecret(t *testing.T) {
	for _, h2Origin := range []bool{false, true} {
		t.Run(map[bool]string{false: "origin http1.1", true: "origin offers h2"}[h2Origin], func(t *testing.T) {
			webSocketThroughBroker(t, h2Origin)
		})
	}
}

// webSocketThroughBroker upgrades a brokered connection; an origin that
// offers h2 must still be asked over HTTP/1.1, where Upgrade exists.
func webSocketThroughBroker(t *testing.T, h2Origin bool) {
	b := newBrokerEnv(t, h2Origin, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "not an upgrade", 400)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		line, _ := brw.ReadString('\n')
		io.WriteString(c, "echo:"+line)
	})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.bca.CertPEM())
	target := net.JoinHostPort("api.allowed.example", itoa(b.origin.addr.Port()))
	raw, _, resp := b.rawConnect("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	tc := tls.Client(raw, &tls.Config{ServerName: "api.allowed.example", RootCAs: pool, NextProtos: []string{"http/1.1"}})
	io.WriteString(tc, "GET /ws HTTP/1.1\r\nHost: "+target+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nAuthorization: Bearer "+tokenPH+"\r\n\r\n")
	br := bufio.NewReader(tc)
	up, err := http.ReadResponse(br, nil)
	if err != nil || up.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", up, err)
	}
	io.WriteString(tc, "ping\n")
	got, err := br.ReadString('\n')
	if err != nil || got != "echo:ping\n" {
		t.Fatalf("after the upgrade: %q %v", got, err)
	}
	if reqs := b.origin.requests(); len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer "+tokenValue {
		t.Fatalf("the upgrade request did not carry the secret: %v", reqs)
	}
	tc.Close()
	b.log.waitEvent(t, map[string]any{"event": "request", "path": "/ws"})
	b.log.waitEvent(t, map[string]any{"event": "response", "status": 101})
}

// TestBrokerStopsForwardingOnceTheAuditLogFails: a request whose event
// cannot be written ends the brokered connection, and no later request
// reaches the origin.
func TestBrokerStopsForwardingOnceTheAuditLogFails(t *testing.T) {
	b := newBrokerEnv(t, false, nil)
	c := b.client(false)
	if resp, _ := do(t, c, b.credentialRequest(t, "api.allowed.example")); resp.StatusCode != 200 {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	b.log.fail.Store(true)
	c.Do(b.credentialRequest(t, "api.allowed.example")) // its record fails before it is sent: it is not
	for i := 0; i < 3; i++ {
		resp, err := c.Do(b.credentialRequest(t, "api.allowed.example"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 503 || resp.Header.Get(ReasonHeader) != string(policy.AuditUnavailable) {
				t.Fatalf("a request after the audit log failed: %d %q", resp.StatusCode, resp.Header.Get(ReasonHeader))
			}
		}
	}
	if n := len(b.origin.requests()); n != 1 {
		t.Fatalf("the origin received %d requests, want 1 (a request whose record cannot be written is not sent)", n)
	}
}

// TestBrokerCurlGetsTheSecretAddedAndAGzippedEchoScrubbed: a real curl,
// over HTTP/1.1 and HTTP/2, asking for compressed responses from an origin
// that gzips whenever asked and echoes the credential. egressd asks the
// origin for identity whatever the client asked, so the echo comes back
// plain, scrubbed, with the placeholder.
func TestBrokerCurlGetsTheSecretAddedAndAGzippedEchoScrubbed(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is required in CI")
		}
		t.Skip("curl not installed")
	}
	b := newBrokerEnv(t, true, func(w http.ResponseWriter, r *http.Request) {
		echo := "auth=" + r.Header.Get("Authorization") + "\n"
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			io.WriteString(w, echo)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, echo)
		zw.Close()
	})
	caFile := filepath.Join(t.TempDir(), "broker-ca.pem")
	os.WriteFile(caFile, b.bca.CertPEM(), 0o600)
	for _, proto := range []string{"--http1.1", "--http2"} {
		out, err := exec.Command(curl, "-sS", proto, "--compressed", "--cacert", caFile, "-x", "http://"+b.addr,
			"-H", "Authorization: Bearer "+tokenPH, b.url("api.allowed.example", "/echo")).CombinedOutput()
		if err != nil || string(out) != "auth=Bearer "+tokenPH+"\n" {
			t.Fatalf("%s: %v %q", proto, err, out)
		}
		noValueIn(t, "curl's output", string(out))
	}
	reqs := b.origin.requests()
	if len(reqs) != 2 || reqs[0].Header.Get("Authorization") != "Bearer "+tokenValue || reqs[1].ProtoMajor != 2 {
		t.Fatalf("origin requests: %d, first Authorization %q", len(reqs), reqs[0].Header.Get("Authorization"))
	}
}

// TestBrokerTunnelInsideABrokeredConnectionIsRefused: a CONNECT sent
// inside the decrypted connection would ask the origin to be a proxy.
func TestBrokerTunnelInsideABrokeredConnectionIsRefused(t *testing.T) {
	b := newBrokerEnv(t, false, nil)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.bca.CertPEM())
	target := net.JoinHostPort("api.allowed.example", itoa(b.origin.addr.Port()))
	raw, _, resp := b.rawConnect("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	tc := tls.Client(raw, &tls.Config{ServerName: "api.allowed.example", RootCAs: pool, NextProtos: []string{"http/1.1"}})
	io.WriteString(tc, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nAuthorization: Bearer "+tokenPH+"\r\n\r\n")
	inner, err := http.ReadResponse(bufio.NewReader(tc), &http.Request{Method: http.MethodConnect})
	if err != nil || inner.StatusCode != http.StatusMethodNotAllowed || inner.Header.Get(ReasonHeader) != string(policy.MethodNotAllowed) {
		t.Fatalf("inner CONNECT answered %v %v, want 405 method_not_allowed", inner, err)
	}
	if n := len(b.origin.requests()); n != 0 {
		t.Fatalf("the origin received %d requests", n)
	}
	b.log.waitEvent(t, map[string]any{"event": "request", "method": "CONNECT", "reason": "method_not_allowed"})
}

// TestBrokerPlaceholderRepeatedToAmplifyHeadersIsRefused: a placeholder of
// 40 bytes standing for an 8 KiB value, repeated a few hundred times in a
// header, would make egressd build megabytes per request.
func TestBrokerPlaceholderRepeatedToAmplifyHeadersIsRefused(t *testing.T) {
	big := strings.Repeat("k", 8<<10)
	b := newBrokerEnv(t, false, nil, func(e *env) {
		e.secrets[0].Value = []byte(big)
	})
	req := b.credentialRequest(t, "api.allowed.example")
	req.Header.Set("X-Api-Key", strings.Repeat(tokenPH, 300))
	resp, body := do(t, b.client(false), req)
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || resp.Header.Get(ReasonHeader) != string(policy.BadRequest) {
		t.Fatalf("status %d reason %q body %q, want 431 bad_request", resp.StatusCode, resp.Header.Get(ReasonHeader), body)
	}
	if n := len(b.origin.requests()); n != 0 {
		t.Fatalf("the origin received %d amplified requests", n)
	}
	if resp, _ := do(t, b.client(false), b.credentialRequest(t, "api.allowed.example")); resp.StatusCode != 200 {
		t.Fatalf("an ordinary request with the long value: %d", resp.StatusCode)
	}
}

// TestBrokerShutdownClosesAKeptAliveBrokeredConnection: a brokered
// connection held open by keep-alive is a tunnel like any other at
// shutdown: closed at the drain deadline, and recorded.
func TestBrokerShutdownClosesAKeptAliveBrokeredConnection(t *testing.T) {
	b := newBrokerEnv(t, false, nil)
	if resp, _ := do(t, b.client(false), b.credentialRequest(t, "api.allowed.example")); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the drain deadline has passed already
	if closed := b.srv.Shutdown(ctx); closed != 1 {
		t.Fatalf("shutdown closed %d tunnels, want the brokered one", closed)
	}
	b.log.waitEvent(t, map[string]any{"event": "close", "host": "api.allowed.example", "reason": "timeout"})
}

// TestBrokerResponseCarryingAnotherSecretsValueIsScrubbed: a value stored
// by the host it is bound to can be served back by another bound host of
// the same service; every secret's value is scrubbed on every brokered
// response, not only the connection's own.
func TestBrokerResponseCarryingAnotherSecretsValueIsScrubbed(t *testing.T) {
	b := newBrokerEnv(t, false, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Stored", otherValue)
		io.WriteString(w, "stored="+otherValue)
	})
	resp, body := do(t, b.client(false), b.credentialRequest(t, "api.allowed.example"))
	if resp.Header.Get("X-Stored") != otherPH || body != "stored="+otherPH {
		t.Fatalf("header %q body %q: OTHER's value should read back as its placeholder", resp.Header.Get("X-Stored"), body)
	}
}

// rangeEcho reflects the credential in a body and honours byte ranges, as
// any static-file or object-store origin does (http.ServeContent).
func rangeEcho(w http.ResponseWriter, r *http.Request) {
	body := "your credential: " + r.Header.Get("Authorization") + "\n"
	http.ServeContent(w, r, "echo.txt", time.Unix(1700000000, 0), strings.NewReader(body))
}

// TestBrokerRangeRequestsCannotCutTheValueOutOfAnEcho: the integration
// asks a bound, echoing origin for its echo in byte ranges, so that each
// answer holds only a piece of the value (which a whole-value scrubber
// passes), or in one multi-range answer whose part header splits it.
// egressd drops Range and If-Range: a brokered host answers whole bodies.
func TestBrokerRangeRequestsCannotCutTheValueOutOfAnEcho(t *testing.T) {
	start := len("your credential: Bearer ")
	ranges := []string{
		fmt.Sprintf("bytes=%d-%d", start, start+9),
		fmt.Sprintf("bytes=%d-%d", start+10, start+19),
		fmt.Sprintf("bytes=%d-%d", start+20, start+len(tokenValue)-1),
		fmt.Sprintf("bytes=%d-%d,%d-%d", start, start+18, start+19, start+len(tokenValue)-1),
		"bytes=-12",
	}
	for _, h2 := range []bool{false, true} {
		b := newBrokerEnv(t, h2, rangeEcho)
		c := b.client(h2)
		for _, rg := range ranges {
			req := b.credentialRequest(t, "api.allowed.example")
			req.Header.Set("Range", rg)
			req.Header.Set("If-Range", time.Unix(1700000000, 0).UTC().Format(http.TimeFormat)) // matches: the range is honoured
			resp, body := do(t, c, req)
			if resp.StatusCode != 200 || body != "your credential: Bearer "+tokenPH+"\n" {
				t.Fatalf("h2=%v Range %s: %d %q, want the whole echo with the placeholder", h2, rg, resp.StatusCode, body)
			}
			noValueIn(t, "a ranged answer", body)
			if resp.Header.Get("Accept-Ranges") != "" {
				t.Fatalf("ranges are advertised: %q", resp.Header.Get("Accept-Ranges"))
			}
		}
		for _, r := range b.origin.requests() {
			if r.Header.Get("Range") != "" || r.Header.Get("If-Range") != "" {
				t.Fatalf("the origin was asked for a range: %q %q", r.Header.Get("Range"), r.Header.Get("If-Range"))
			}
		}
	}
}

// TestBrokerPartialAnswerEgressdNeverAskedForIsRefused: egressd never asks
// a brokered origin for a range, so a 206 or a multipart/byteranges answer
// is refused (it could carry a piece of a value) and audited.
func TestBrokerPartialAnswerEgressdNeverAskedForIsRefused(t *testing.T) {
	b := newBrokerEnv(t, false, func(w http.ResponseWriter, r *http.Request) {
		piece := r.Header.Get("Authorization")[7:20]
		if r.URL.Path == "/multipart" {
			w.Header().Set("Content-Type", "multipart/byteranges; boundary=x")
			io.WriteString(w, "--x\r\nContent-Range: bytes 7-19/60\r\n\r\n"+piece+"\r\n--x--\r\n")
			return
		}
		w.Header().Set("Content-Range", "bytes 7-19/60")
		w.WriteHeader(http.StatusPartialContent)
		io.WriteString(w, piece)
	})
	c := b.client(false)
	for _, path := range []string{"/partial", "/multipart"} {
		req, _ := http.NewRequest("GET", b.url("api.allowed.example", path), nil)
		req.Header.Set("Authorization", "Bearer "+tokenPH)
		resp, body := do(t, c, req)
		if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(ReasonHeader) != "response_refused" {
			t.Fatalf("%s: %d %q %q, want 502 response_refused", path, resp.StatusCode, resp.Header.Get(ReasonHeader), body)
		}
		if strings.Contains(body, tokenValue[:13]) {
			t.Fatalf("%s: the piece reached the client: %q", path, body)
		}
	}
	// Both requests went out, each recorded before it did; both
	// outcomes say the answer was refused.
	b.log.waitEvent(t, map[string]any{"event": "response", "req": 2, "reason": "response_refused", "status": 502})
	b.log.waitEvent(t, map[string]any{"event": "response", "req": 1, "reason": "response_refused", "status": 502})
	if lines, folded := requestLines(t, b.log); lines != 2 || folded != 0 {
		t.Fatalf("%d request lines and %d folded, want both requests a line of their own", lines, folded)
	}
	noValueIn(t, "the audit log", b.log.String())
}

// TestBrokerLongBasicTokenTheScrubberWouldSearchForIsRefused: the
// integration chooses the Basic token egressd then looks for in every
// response (600 KB of zero bytes before the placeholder make an 800 KB
// token); a header value carrying a placeholder is bounded too.
func TestBrokerLongBasicTokenTheScrubberWouldSearchForIsRefused(t *testing.T) {
	b := newBrokerEnv(t, false, nil)
	c := b.client(false)
	long := base64.StdEncoding.EncodeToString(append(make([]byte, 600000), ":"+tokenPH...))
	for name, set := range map[string]func(*http.Request){
		"800 KB Basic token": func(r *http.Request) { r.Header.Set("Authorization", "Basic "+long) },
		"4 KiB Basic token": func(r *http.Request) {
			r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(strings.Repeat("u", 3<<10)+":"+tokenPH)))
		},
		"17 KiB header value": func(r *http.Request) { r.Header.Set("X-Api-Key", strings.Repeat("x", 17<<10)+tokenPH) },
	} {
		req := b.credentialRequest(t, "api.allowed.example")
		set(req)
		resp, body := do(t, c, req)
		// Past 64 KiB net/http's own 431 answers, before egressd reads it.
		wantReason := string(policy.BadRequest)
		if len(req.Header.Get("Authorization")) > 64<<10 {
			wantReason = ""
		}
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || resp.Header.Get(ReasonHeader) != wantReason {
			t.Fatalf("%s: %d %q %q, want 431 %s", name, resp.StatusCode, resp.Header.Get(ReasonHeader), body, wantReason)
		}
	}
	if n := len(b.origin.requests()); n != 0 {
		t.Fatalf("the origin received %d oversized requests", n)
	}
	// Long values without a placeholder are the integration's business.
	req := b.credentialRequest(t, "api.allowed.example")
	req.Header.Set("X-Other", strings.Repeat("x", 32<<10))
	if resp, _ := do(t, c, req); resp.StatusCode != 200 {
		t.Fatalf("a long header with no placeholder: %d", resp.StatusCode)
	}
}

// requestLines counts the request events in the log, and the requests
// folded into summaries.
func requestLines(t *testing.T, log *syncBuffer) (lines int, folded int64) {
	for _, ev := range log.events(t) {
		if ev["event"] != "request" {
			continue
		}
		if n, ok := ev["suppressed"].(float64); ok {
			folded += int64(n)
			continue
		}
		lines++
	}
	return lines, folded
}

// TestBrokerFloodOfRefusedRequestsWritesBoundedLines: one HTTP/2
// connection sends request after request for another Host, each refused
// host_mismatch; they fold like refused connections, every one accounted
// for, instead of one line each.
func TestBrokerFloodOfRefusedRequestsWritesBoundedLines(t *testing.T) {
	b := newBrokerEnv(t, false, nil, withFoldWindow(time.Hour), withConfig(func(c *policy.Config) {
		c.Limits.RequestsPerSecond, c.Limits.RequestBurst = 1e6, 1e6 // folding alone, no rate limit
	}))
	c := b.client(true)
	const n = 300
	for i := 0; i < n; i++ {
		req := b.credentialRequest(t, "api.allowed.example")
		req.URL.Path = "/" + strings.Repeat("a", 3900)
		req.Host = "other.allowed.example"
		if resp, _ := do(t, c, req); resp.StatusCode != 403 {
			t.Fatalf("request %d: %d, want 403", i, resp.StatusCode)
		}
	}
	b.srv.opts.Suppress.Flush(true)
	lines, folded := requestLines(t, b.log)
	if lines > 4 || int64(lines)+folded != n {
		t.Fatalf("%d refused requests wrote %d lines and folded %d; want at most 4 lines, every request accounted for", n, lines, folded)
	}
}

// TestBrokerFloodOfAllowedRequestsIsRateLimited: every allowed request
// stays one line (the record of where a secret went), so the requests are
// bounded: past limits.request_burst, 429 limit_exceeded, folded.
func TestBrokerFloodOfAllowedRequestsIsRateLimited(t *testing.T) {
	b := newBrokerEnv(t, true, nil, withFoldWindow(time.Hour), withConfig(func(c *policy.Config) {
		c.Limits.RequestsPerSecond, c.Limits.RequestBurst = 0.001, 5 // no token comes back during the test
	}))
	c := b.client(true)
	limited := 0
	for i := 0; i < 40; i++ {
		resp, body := do(t, c, b.credentialRequest(t, "api.allowed.example"))
		switch {
		case resp.StatusCode == 200:
		case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get(ReasonHeader) == string(policy.LimitExceeded):
			limited++
		default:
			t.Fatalf("request %d: %d %q %q", i, resp.StatusCode, resp.Header.Get(ReasonHeader), body)
		}
	}
	if got := len(b.origin.requests()); got != 5 || limited != 35 {
		t.Fatalf("the origin received %d requests and %d were limited, want 5 and 35", got, limited)
	}
	b.srv.opts.Suppress.Flush(true)
	lines, folded := requestLines(t, b.log)
	if lines > 5+4 || int64(lines)+folded != 40 {
		t.Fatalf("40 requests wrote %d lines and folded %d", lines, folded)
	}
}

// TestBrokerPlaceholderHiddenFromTheMisdirectionCheckIsRefused: another
// host's placeholder percent-encoded in the path or the query (which the
// origin decodes), or in a request trailer (which arrives after the
// request is forwarded), is refused and audited like one in a header; a
// trailer carrying it never reaches the origin.
func TestBrokerPlaceholderHiddenFromTheMisdirectionCheckIsRefused(t *testing.T) {
	var mu sync.Mutex
	var trailers []string
	b := newBrokerEnv(t, false, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		trailers = append(trailers, r.Trailer.Get("X-Key"))
		mu.Unlock()
		io.WriteString(w, "ok")
	}, withFoldWindow(time.Hour))
	encoded := "%65" + otherPH[1:]
	for name, mk := range map[string]func() *http.Request{
		"path": func() *http.Request {
			r := b.credentialRequest(t, "api.allowed.example")
			r.URL.Path, r.URL.RawPath, r.URL.RawQuery = "/"+otherPH, "/"+encoded, ""
			return r
		},
		"query": func() *http.Request {
			r := b.credentialRequest(t, "api.allowed.example")
			r.URL.RawQuery = "k=" + encoded + "&bad=%zz"
			return r
		},
		"double-encoded": func() *http.Request {
			r := b.credentialRequest(t, "api.allowed.example")
			r.URL.RawQuery = "k=%2565" + otherPH[1:]
			return r
		},
		"trailer": func() *http.Request {
			r, _ := http.NewRequest("POST", b.url("api.allowed.example", "/upload"), io.NopCloser(strings.NewReader("x")))
			r.ContentLength = -1
			r.Trailer = http.Header{"X-Key": {otherPH}}
			return r
		},
	} {
		for _, h2 := range []bool{false, true} {
			resp, body := do(t, b.client(h2), mk())
			if resp.StatusCode != 403 || resp.Header.Get(ReasonHeader) != string(policy.SecretMisdirected) {
				t.Fatalf("%s (h2 %v): %d %q %q, want 403 secret_misdirected", name, h2, resp.StatusCode, resp.Header.Get(ReasonHeader), body)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, tr := range trailers {
		if strings.Contains(tr, otherPH) {
			t.Fatal("the origin received the trailer carrying another host's placeholder")
		}
	}
	b.srv.opts.Suppress.Flush(true)
	if lines, folded := requestLines(t, b.log); int64(lines)+folded != 8 {
		t.Fatalf("%d lines and %d folded refusals, want the 8 refusals audited", lines, folded)
	}
	if strings.Count(b.log.String(), `"reason":"secret_misdirected"`) == 0 {
		t.Fatal("no secret_misdirected line")
	}
}

// TestBrokerErrorQuotingASubstitutedHeaderDoesNotPutTheValueInTheLog: the
// program sent "Upgrade: websocket, $PLACEHOLDER"; the origin accepted the
// websocket token and answered 101 "Upgrade: websocket", and the reverse
// proxy's error quoted the requested Upgrade after substitution, value and
// all, into the request event's error field (round 4). Errors are redacted.
func TestBrokerErrorQuotingASubstitutedHeaderDoesNotPutTheValueInTheLog(t *testing.T) {
	b := newBrokerEnv(t, false, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(strings.ToLower(r.Header.Get("Upgrade")), "websocket") {
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", "websocket")
			w.WriteHeader(http.StatusSwitchingProtocols)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
	})
	req, _ := http.NewRequest("GET", b.url("api.allowed.example", "/ws"), nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket, "+tokenPH)
	resp, err := b.client(false).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	b.log.waitEvent(t, map[string]any{"event": "response", "host": "api.allowed.example"})
	noValueIn(t, "the audit log", b.log.String())
}
