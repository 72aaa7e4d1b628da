package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy/proxytest"
	"github.com/miekg/dns"
)

// syncBuffer collects audit lines from concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	// fail makes every write fail, as a full disk would.
	fail atomic.Bool
	// wrote is signalled on every line.
	wrote chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{wrote: make(chan struct{}, 1024)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	if b.fail.Load() {
		return 0, io.ErrShortWrite
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return n, err
}

// events returns every audit line decoded.
func (b *syncBuffer) events(t testing.TB) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line is not JSON: %s", sc.Bytes())
		}
		out = append(out, m)
	}
	return out
}

// waitEvent waits until an event matching every key/value in want is
// written, and returns it. It waits on writes, not on a sleep.
func (b *syncBuffer) waitEvent(t testing.TB, want map[string]any) map[string]any {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		for _, e := range b.events(t) {
			if matches(e, want) {
				return e
			}
		}
		select {
		case <-b.wrote:
		case <-timeout:
			t.Fatalf("no audit event matching %v; log:\n%s", want, b.String())
		}
	}
}

// has reports whether an event matching want is already written, without
// waiting: for records that must precede the answer a client has read.
func (b *syncBuffer) has(t testing.TB, want map[string]any) bool {
	for _, e := range b.events(t) {
		if matches(e, want) {
			return true
		}
	}
	return false
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func matches(e, want map[string]any) bool {
	for k, v := range want {
		got, ok := e[k]
		if !ok {
			return false
		}
		switch v := v.(type) {
		case int:
			if f, ok := got.(float64); !ok || f != float64(v) {
				return false
			}
		default:
			if got != v {
				return false
			}
		}
	}
	return true
}

// env is one egressd proxy with its origin, DNS server and audit log.
type env struct {
	t        testing.TB
	ca       *proxytest.CA
	dns      *proxytest.DNS
	log      *syncBuffer
	audit    *audit.Log
	registry *policy.Registry
	cfg      policy.Config
	dir      string
	srv      *Server
	addr     string // proxy listener
	origin   *proxytest.Origin
	hosts    []string // the manifest's entries at start
	fold     time.Duration
	broker   *BrokerOptions  // broker_test.go: withBroker
	secrets  []policy.Secret // bound into the policy after load (broker_test.go)
	auditTo  io.Writer       // where the audit log goes instead of log (idlemem_test.go: withAuditTo)
	gate     *Gate           // the global connection cap, nil for none
}

// foldWindow is newEnv's denial folding window, as serve's.
const foldWindow = time.Second

// withFoldWindow sets the denial folding window: a test that counts folded
// lines sets one that its own pace cannot outlast, then flushes.
func withFoldWindow(d time.Duration) envOption { return func(e *env) { e.fold = d } }

type envOption func(*env)

// withHosts sets the manifest's entries at start.
func withHosts(hosts ...string) envOption { return func(e *env) { e.hosts = hosts } }

// withConfig lets a test adjust the config before the proxy starts.
func withConfig(f func(*policy.Config)) envOption { return func(e *env) { f(&e.cfg) } }

// newEnv starts a proxy for a manifest that allows api.allowed.example and
// *.cdn.allowed.example, with a TLS origin on 127.0.0.2 serving both names,
// resolved by a loopback DNS server, and allow_private 127.0.0.2/32 so the
// origin is reachable.
func newEnv(t testing.TB, opts ...envOption) *env {
	e := &env{t: t, ca: proxytest.NewCA(t), dns: proxytest.StartDNS(t), log: newSyncBuffer(), dir: t.TempDir(), fold: foldWindow}
	e.origin = proxytest.StartOrigin(t, e.ca, "127.0.0.2", "api.allowed.example", "*.cdn.allowed.example", "other.allowed.example", "evil.allowed.example")
	e.hosts = []string{"api.allowed.example", "*.cdn.allowed.example", "other.allowed.example"}
	e.cfg = policy.DefaultConfig()
	e.cfg.Integrations = []policy.Integration{{Manifest: e.dir, Listen: "127.0.0.1:0",
		Exemptions: policy.Exemptions{
			AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")},
			AllowPorts:   []uint16{e.origin.Addr.Port()}, // the origin cannot bind 443 here
		}}}
	e.cfg.Timeouts.ClientHello = 2 * time.Second
	e.cfg.Timeouts.RequestHeader = 2 * time.Second
	for _, o := range opts {
		o(e)
	}
	e.writeManifest("1.0.0", e.hosts...)
	var err error
	var sink io.Writer = e.log
	if e.auditTo != nil {
		sink = e.auditTo
	}
	e.audit, err = audit.New(sink, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.registry = policy.NewRegistry(policy.InMemory(), nil)
	if outs := e.registry.Load(e.cfg); outs[0].Result != policy.Loaded {
		t.Fatalf("load: %+v", outs)
	}
	e.bindSecrets()
	e.srv = New(Options{Broker: e.broker,
		Key: e.dir, Registry: e.registry, Resolver: NewResolver([]string{e.dns.Addr}, 2*time.Second),
		Audit: e.audit, Suppress: audit.NewSuppressor(e.audit, e.fold), Gate: e.gate,
		Limits: e.cfg.Limits, Timeouts: e.cfg.Timeouts, OnAuditFailure: e.cfg.Audit.OnFailure,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	go e.srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e.srv.Shutdown(ctx)
	})
	return e
}

func (e *env) writeManifest(version string, hosts ...string) {
	list, _ := json.Marshal(hosts)
	if hosts == nil {
		list = []byte("[]")
	}
	doc := `{"schemaVersion":1,"id":"com.test.weather","version":"` + version + `","runtime":{"kind":"local-mcp","command":"node"},
	"permissions":[{"kind":"network","domains":` + string(list) + `}]}`
	if err := os.WriteFile(filepath.Join(e.dir, "voiceos.integration.json"), []byte(doc), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// resolveToOrigin makes each name resolve to the origin's address.
func (e *env) resolveToOrigin(names ...string) {
	for _, n := range names {
		e.dns.Add(e.t, dns.Fqdn(n)+" 60 IN A "+e.origin.Addr.Addr().String())
	}
}

// client returns a Go net/http client that uses the proxy and trusts the CA,
// and sends CONNECT to the origin's port.
func (e *env) client() *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr}),
			TLSClientConfig: &tls.Config{RootCAs: e.ca.Pool},
		},
	}
}

// originURL is https://host:ORIGINPORT/path.
func (e *env) originURL(host, path string) string {
	return "https://" + net.JoinHostPort(host, itoa(e.origin.Addr.Port())) + path
}

func itoa(p uint16) string {
	return strings.TrimPrefix(netip.AddrPortFrom(netip.IPv4Unspecified(), p).String(), "0.0.0.0:")
}

// rawConnectErr is rawConnect for hostile heads: a read error is returned
// as a nil response, not a test failure.
func (e *env) rawConnectErr(head string) (net.Conn, *bufio.Reader, *http.Response) {
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, head)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, nil, nil
	}
	return c, br, resp
}

// rawConnect sends a raw request head to the proxy and returns the
// connection and the parsed response.
func (e *env) rawConnect(head string) (net.Conn, *bufio.Reader, *http.Response) {
	e.t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, head); err != nil {
		e.t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		e.t.Fatalf("reading response to %q: %v", head, err)
	}
	return c, br, resp
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
