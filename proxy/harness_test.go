package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
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
	"github.com/miekg/dns"
)

// testCA issues certificates for the loopback origins.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egressd test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

func (ca *testCA) leaf(t testing.TB, names ...string) tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		DNSNames: names, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// origin is a real TLS server on a loopback address. It answers HTTP with
// "hello from NAME" and, on /echo, echoes the body.
type origin struct {
	ln   net.Listener
	addr netip.AddrPort
}

func startOrigin(t testing.TB, ca *testCA, ip string, names ...string) *origin {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		ErrorLog:  log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, names...)}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/echo" {
				io.Copy(w, r.Body)
				return
			}
			io.WriteString(w, "hello from "+r.Host)
		}),
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return &origin{ln: ln, addr: netip.MustParseAddrPort(ln.Addr().String())}
}

// dnsServer is a real miekg/dns server on loopback that answers from a
// table and counts every question it is asked.
type dnsServer struct {
	addr    string
	mu      sync.Mutex
	records map[string][]dns.RR // by lower-case fqdn and type name "A"/"AAAA"
	asked   map[string]int
	handler func(w dns.ResponseWriter, r *dns.Msg) bool // optional override; true if handled
}

func startDNS(t testing.TB) *dnsServer {
	d := &dnsServer{records: map[string][]dns.RR{}, asked: map[string]int{}}
	// UDP and TCP on one random port; retry if the TCP side is taken (an
	// outgoing connection may hold that ephemeral port).
	var pc net.PacketConn
	var ln net.Listener
	for attempt := 0; ; attempt++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		if attempt == 20 {
			t.Fatal(err)
		}
	}
	d.addr = pc.LocalAddr().String()
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: d}, {Listener: ln, Handler: d}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ActivateAndServe()
		<-started
		t.Cleanup(func() { srv.Shutdown() })
	}
	return d
}

// add records an answer; rr is in zone-file syntax, e.g. "a.example. 60 IN A 127.0.0.2".
func (d *dnsServer) add(t testing.TB, rrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range rrs {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		key := strings.ToLower(rr.Header().Name)
		d.records[key] = append(d.records[key], rr)
	}
}

// setHandler installs an override consulted before the table.
func (d *dnsServer) setHandler(h func(w dns.ResponseWriter, r *dns.Msg) bool) {
	d.mu.Lock()
	d.handler = h
	d.mu.Unlock()
}

func (d *dnsServer) questions(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked[strings.ToLower(dns.Fqdn(name))]
}

func (d *dnsServer) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	d.mu.Lock()
	q := r.Question[0] // miekg/dns's DefaultMsgAcceptFunc guarantees exactly one question
	d.asked[strings.ToLower(q.Name)]++
	h := d.handler
	d.mu.Unlock()
	if h != nil && h(w, r) {
		return
	}
	m := new(dns.Msg)
	m.SetReply(r)
	d.mu.Lock()
	for _, rr := range d.records[strings.ToLower(q.Name)] {
		if rr.Header().Rrtype == q.Qtype || rr.Header().Rrtype == dns.TypeCNAME {
			m.Answer = append(m.Answer, rr)
			if cn, ok := rr.(*dns.CNAME); ok {
				for _, rr2 := range d.records[strings.ToLower(cn.Target)] {
					if rr2.Header().Rrtype == q.Qtype {
						m.Answer = append(m.Answer, rr2)
					}
				}
			}
		}
	}
	d.mu.Unlock()
	w.WriteMsg(m)
}

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
	ca       *testCA
	dns      *dnsServer
	log      *syncBuffer
	audit    *audit.Log
	registry *policy.Registry
	cfg      policy.Config
	dir      string
	srv      *Server
	addr     string // proxy listener
	origin   *origin
	hosts    []string // the manifest's entries at start
}

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
	e := &env{t: t, ca: newTestCA(t), dns: startDNS(t), log: newSyncBuffer(), dir: t.TempDir()}
	e.origin = startOrigin(t, e.ca, "127.0.0.2", "api.allowed.example", "*.cdn.allowed.example", "other.allowed.example", "evil.allowed.example")
	e.hosts = []string{"api.allowed.example", "*.cdn.allowed.example", "other.allowed.example"}
	e.cfg = policy.DefaultConfig()
	e.cfg.Integrations = []policy.Integration{{Manifest: e.dir, Listen: "127.0.0.1:0",
		Exemptions: policy.Exemptions{
			AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")},
			AllowPorts:   []uint16{e.origin.addr.Port()}, // the origin cannot bind 443 here
		}}}
	e.cfg.Timeouts.ClientHello = 2 * time.Second
	e.cfg.Timeouts.RequestHeader = 2 * time.Second
	for _, o := range opts {
		o(e)
	}
	e.writeManifest("1.0.0", e.hosts...)
	var err error
	e.audit, err = audit.New(e.log, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.registry = policy.NewRegistry(policy.InMemory(), nil)
	if outs := e.registry.Load(e.cfg); outs[0].Result != policy.Loaded {
		t.Fatalf("load: %+v", outs)
	}
	e.srv = New(Options{
		Key: e.dir, Registry: e.registry, Resolver: NewResolver([]string{e.dns.addr}, 2*time.Second),
		Audit: e.audit, Suppress: audit.NewSuppressor(e.audit, time.Second),
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
		e.dns.add(e.t, dns.Fqdn(n)+" 60 IN A "+e.origin.addr.Addr().String())
	}
}

// client returns a Go net/http client that uses the proxy and trusts the CA,
// and sends CONNECT to the origin's port.
func (e *env) client() *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: e.addr}),
			TLSClientConfig: &tls.Config{RootCAs: e.ca.pool},
		},
	}
}

// originURL is https://host:ORIGINPORT/path.
func (e *env) originURL(host, path string) string {
	return "https://" + net.JoinHostPort(host, itoa(e.origin.addr.Port())) + path
}

func itoa(p uint16) string {
	return strings.TrimPrefix(netip.AddrPortFrom(netip.IPv4Unspecified(), p).String(), "0.0.0.0:")
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
