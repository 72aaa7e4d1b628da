package proxy

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Bounds on what one brokered client connection can make egressd hold
// (issue 15, fifth attacker): upstream sockets, scrubber work, memory.

// TestBrokerSlowUploadsOnOneH2ConnectionOpenAtMostTwoUpstream: eight
// concurrent slow uploads multiplexed on one HTTP/2 connection to an
// HTTP/1.1 origin opened eight upstream sockets (sixteen with upgrades),
// against a descriptor budget that counted two per connection; thirty such
// connections took egressd to its limit. The origin now accepts at most
// two connections, and every upload still completes.
func TestBrokerSlowUploadsOnOneH2ConnectionOpenAtMostTwoUpstream(t *testing.T) {
	arrived := make(chan struct{}, 16)
	b := newBrokerEnv(t, false, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	c := b.client(true)
	// One HTTP/2 connection first: concurrent first requests would each
	// open a tunnel of their own.
	if resp, _ := do(t, c, b.credentialRequest(t, "api.allowed.example")); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	<-arrived
	const n = 8
	writers := make([]*io.PipeWriter, n)
	results := make(chan error, n)
	for i := range writers {
		pr, pw := io.Pipe()
		writers[i] = pw
		req, _ := http.NewRequest("POST", b.url("api.allowed.example", "/upload"), pr)
		req.Header.Set("Authorization", "Bearer "+tokenPH)
		go func() {
			resp, err := c.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != 200 {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			results <- err
		}()
	}
	<-arrived
	<-arrived // two uploads are at the origin, the others queued or dialling
	for _, pw := range writers {
		pw.Write([]byte("x"))
		pw.Close()
	}
	for range n {
		if err := <-results; err != nil {
			t.Fatalf("an upload failed: %v", err)
		}
	}
	if got := b.origin.accepted.Load(); got > 2 {
		t.Fatalf("one brokered client connection opened %d connections to the origin, want at most 2", got)
	}
}

// TestBrokerRequestWaitingForABusyOriginIsRefusedInTime: both upstream
// connections are held by the origin; a third request on the same HTTP/2
// connection waited for ever (its header in egressd's memory). It gets a
// 503 with the reason code once timeouts.dial has passed.
func TestBrokerRequestWaitingForABusyOriginIsRefusedInTime(t *testing.T) {
	held := make(chan struct{}, 4)
	release := make(chan struct{})
	b := newBrokerEnv(t, false, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			held <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}, withConfig(func(c *policy.Config) { c.Timeouts.Dial = 3 * time.Second }))
	defer close(release)
	c := b.client(true)
	for range 2 {
		go func() {
			req := b.credentialRequest(t, "api.allowed.example")
			req.URL.Path = "/hold"
			if resp, err := c.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	<-held
	<-held
	resp, body := do(t, c, b.credentialRequest(t, "api.allowed.example"))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(ReasonHeader) != string(policy.Timeout) {
		t.Fatalf("third request: %d %q %q, want 503 timeout", resp.StatusCode, resp.Header.Get(ReasonHeader), body)
	}
	b.log.waitEvent(t, map[string]any{"event": "request", "reason": "timeout", "status": 503})
}

// TestBrokerSlowlorisHeaderIsCutOffAfterTheHeaderTimeout: a request header
// trickled (here: never finished) on a brokered connection is cut off
// after timeouts.request_header, not held for the TLS handshake's timeout
// or for ever.
func TestBrokerSlowlorisHeaderIsCutOffAfterTheHeaderTimeout(t *testing.T) {
	b := newBrokerEnv(t, false, nil, withConfig(func(c *policy.Config) {
		c.Timeouts.RequestHeader = 500 * time.Millisecond
		c.Timeouts.ClientHello = time.Minute
		c.Timeouts.Idle = time.Minute
	}))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.bca.CertPEM())
	target := net.JoinHostPort("api.allowed.example", itoa(b.origin.addr.Port()))
	raw, _, resp := b.rawConnect("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	tc := tls.Client(raw, &tls.Config{ServerName: "api.allowed.example", RootCAs: pool, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(tc, "GET / HTTP/1.1\r\nHost: "+target+"\r\nX-Slow: a")
	tc.SetReadDeadline(time.Now().Add(20 * time.Second)) // a failsafe, not a measure
	_, err := io.Copy(io.Discard, tc)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the unfinished header was still held after 20 s")
	}
	if n := len(b.origin.requests()); n != 0 {
		t.Fatalf("the origin received %d requests", n)
	}
}

// basicEchoLines is the scrubber attack: n header lines, each a Basic
// credential whose token egressd would build and then look for in the
// answer.
func basicEchoLines(n int) []string {
	var out []string
	for i := range n {
		out = append(out, "Basic "+base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("{%05d:%s", i, tokenPH))))
	}
	return out
}

// TestBrokerThousandsOfBasicEchoPairsAreRefused: 6000 "User-Agent: Basic
// base64({NNNNN:placeholder})" lines (600 KB) made 6000 tokens egressd
// searched every read of the answer for: a 1 MB answer cost 15 s of CPU.
// More than 4 Basic credentials carrying a placeholder are refused (431
// bad_request, audited) and a header past 64 KiB is refused by the
// server, over HTTP/1.1 and HTTP/2.
func TestBrokerThousandsOfBasicEchoPairsAreRefused(t *testing.T) {
	b := newBrokerEnv(t, false, nil)
	for _, h2 := range []bool{false, true} {
		c := b.client(h2)
		req := b.credentialRequest(t, "api.allowed.example")
		req.Header["X-Echo"] = basicEchoLines(20) // (net/http's client sends one User-Agent line only)
		resp, body := do(t, c, req)
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || resp.Header.Get(ReasonHeader) != string(policy.BadRequest) {
			t.Fatalf("h2 %v, 20 Basic lines: %d %q %q, want 431 bad_request", h2, resp.StatusCode, resp.Header.Get(ReasonHeader), body)
		}
		req = b.credentialRequest(t, "api.allowed.example")
		req.Header["X-Echo"] = basicEchoLines(1000) // 100 KB
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Fatalf("h2 %v, a 100 KB header: %d, want 431", h2, resp.StatusCode)
			}
		}
	}
	if n := len(b.origin.requests()); n != 0 {
		t.Fatalf("the origin received %d requests", n)
	}
	b.log.waitEvent(t, map[string]any{"event": "request", "reason": "bad_request", "status": 431})
}

// TestBrokerStoredBasicTokenIsScrubbedFromLaterAnswers: the origin stores
// the Authorization header and shows it on a later request ("last
// request" debug endpoint). A Bearer value was scrubbed there, the Basic
// token egressd built was not: the integration decoded the real value.
// Built tokens are remembered for the integration's later answers, on the
// same connection and on another.
func TestBrokerStoredBasicTokenIsScrubbedFromLaterAnswers(t *testing.T) {
	var mu sync.Mutex
	last := ""
	b := newBrokerEnv(t, false, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/last" {
			io.WriteString(w, "previous Authorization: "+last)
			return
		}
		last = r.Header.Get("Authorization")
		io.WriteString(w, "stored")
	})
	written := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+tokenPH))
	get := func(c *http.Client, path, auth string) string {
		req, _ := http.NewRequest("GET", b.url("api.allowed.example", path), nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, body := do(t, c, req)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, body)
		}
		return body
	}
	c := b.client(false)
	get(c, "/store", written)
	for name, c := range map[string]*http.Client{"same connection": c, "another connection": b.client(true)} {
		got := get(c, "/last", "")
		if got != "previous Authorization: "+written {
			t.Fatalf("%s: /last answered %q, want the token the integration wrote", name, got)
		}
	}
}

// TestBrokerUnfinishedHTTP2HeaderBlockIsCutOff: over HTTP/2 a header is
// a HEADERS frame and CONTINUATION frames; one never finished (no
// END_HEADERS) holds a stream that net/http's ReadHeaderTimeout does not
// see. The connection is closed once timeouts.idle passes with no
// request, and the unfinished block stays under the 64 KiB header bound;
// the server's SETTINGS say so, and that it takes 8 streams at once.
func TestBrokerUnfinishedHTTP2HeaderBlockIsCutOff(t *testing.T) {
	b := newBrokerEnv(t, false, nil, withConfig(func(c *policy.Config) {
		c.Timeouts.Idle = time.Second
		c.Timeouts.ClientHello = time.Minute
	}))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.bca.CertPEM())
	target := net.JoinHostPort("api.allowed.example", itoa(b.origin.addr.Port()))
	raw, _, resp := b.rawConnect("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	tc := tls.Client(raw, &tls.Config{ServerName: "api.allowed.example", RootCAs: pool, NextProtos: []string{"h2"}})
	if err := tc.Handshake(); err != nil || tc.ConnectionState().NegotiatedProtocol != "h2" {
		t.Fatalf("handshake: %v, protocol %q", err, tc.ConnectionState().NegotiatedProtocol)
	}
	io.WriteString(tc, http2.ClientPreface)
	fr := http2.NewFramer(tc, tc)
	fr.WriteSettings()
	// The server's SETTINGS bound what one connection may ask at once.
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	settings, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %v, want SETTINGS", f)
	}
	if v, ok := settings.Value(http2.SettingMaxConcurrentStreams); !ok || v != 8 {
		t.Fatalf("MAX_CONCURRENT_STREAMS %d (%v), want 8", v, ok)
	}
	if v, ok := settings.Value(http2.SettingMaxHeaderListSize); !ok || v > 64<<10+4096 {
		t.Fatalf("MAX_HEADER_LIST_SIZE %d (%v), want about 64 KiB", v, ok)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", target}, {":path", "/"}, {"x-slow", "a"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true}); err != nil { // no EndHeaders
		t.Fatal(err)
	}
	tc.SetReadDeadline(time.Now().Add(20 * time.Second)) // a failsafe, not a measure
	_, err = io.Copy(io.Discard, tc)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the unfinished HTTP/2 header block was still held after 20 s")
	}
	if n := len(b.origin.requests()); n != 0 {
		t.Fatalf("the origin received %d requests", n)
	}
}
