package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"time"

	"github.com/egressd/egressd/policy"
	"golang.org/x/net/http/httpguts"
)

// Conn is one brokered connection: a client that asked for Host, and the
// pinned, checked TCP connection to the origin egressd already dialled.
type Conn struct {
	Host string // canonical; the leaf's name and the origin's ServerName
	Port uint16
	Leaf *tls.Certificate
	// Roots verify the origin; nil means the system roots.
	Roots *x509.CertPool
	// Bound are the secrets bound to Host; Unbound every other secret,
	// whose placeholder is refused on this connection. Every secret's
	// value is scrubbed from responses.
	Bound, Unbound []policy.Secret
	// Secrets, when set, are every secret in force now (a reload may have
	// rotated one since the connection opened): each response is
	// scrubbed of them too.
	Secrets func() []policy.Secret
	// Upstream is the first connection to the origin. Redial makes any
	// other, by the same pinned, checked path; nothing else dials.
	Upstream net.Conn
	Redial   func(ctx context.Context) (net.Conn, error)
	// Record receives each request's record: for a request forwarded,
	// just before its first byte (and the value in it) goes to the origin,
	// with no outcome yet, so that nothing carries a secret out without a
	// record; an error then keeps the request from being sent. For a
	// request refused before it reached the origin, once, with its reason
	// and the status answered. Outcome receives a forwarded request's
	// outcome when its exchange ends, however it ends (a client that walks
	// away mid-answer included). Both must be safe for concurrent use
	// (HTTP/2 serves streams at once).
	Record  func(Request) error
	Outcome func(Request)
	// Admit, when set, is asked before each request is forwarded: a
	// reason refuses it (the audit log cannot be written).
	Admit func() policy.Reason
	// Sentence is the line a refusal answers with.
	Sentence func(policy.Reason) string
	// HandshakeTimeout bounds each TLS handshake; HeaderTimeout a
	// request's header; IdleTimeout a connection waiting for its next
	// request; WaitTimeout a request waiting for a connection to the
	// origin (all maxUpstreamConns busy).
	HandshakeTimeout, HeaderTimeout, IdleTimeout, WaitTimeout time.Duration
	// Built remembers the Basic tokens egressd built, so that every later
	// answer is scrubbed of them (an origin may store a credential and
	// show it back); shared by the connections of one integration. Nil
	// means one store for this connection alone.
	Built *BuiltTokens
	// Quarantine is the brokering state of the integration, shared by its
	// connections like Built: once a request carried a secret's value,
	// every connection ends and every later request is refused (guard.go).
	// Nil means one for this connection alone.
	Quarantine *Quarantine
}

// Request is one request, or its outcome, for the audit log.
type Request struct {
	Seq          uint64 // the request's number on its connection, from 1: links a record to its outcome
	Method, Path string
	Status       int
	Up, Down     int64
	Secrets      []string // substituted, by name
	Reason       policy.Reason
	Err          string
}

// ReasonHeader carries the reason code on a refused request; it is
// proxy.ReasonHeader, the header every egressd refusal carries.
const ReasonHeader = "X-Egress-Reason"

// maxUpstreamConns bounds the connections one brokered client connection
// holds to its origin at once, upgrades included: with its own it is
// MaxDescriptors, what the descriptor budget counts for a brokered
// connection. An HTTP/2 client multiplexing onto an HTTP/1.1 origin gets
// two requests through at a time; the others wait (WaitTimeout), a bound
// on what one client connection costs egressd and the origin.
const maxUpstreamConns = 2

// upstreamWindow is the HTTP/2 receive window of an upstream connection:
// the most an origin sends ahead of what the program reads, per connection
// (a quarter of it per stream).
const upstreamWindow = 256 << 10

// clientWindow is the HTTP/2 receive window egressd offers the program on
// a brokered connection: the most it sends ahead of an origin that does
// not read, per connection (a quarter of it per stream). Brokered hosts
// are APIs; 64 KiB a stream still fills a loopback or LAN path.
const clientWindow = 256 << 10

// MaxDescriptors is what one brokered client connection may hold: its own
// socket and maxUpstreamConns to the origin.
const MaxDescriptors = 1 + maxUpstreamConns

// Bounds on what one brokered client connection may make egressd keep: a
// request header of at most maxHeaderBytes (HTTP/1.1 and HTTP/2's header
// list alike; net/http answers 431 past it), at most maxStreams HTTP/2
// requests at once, each waiting for an upstream connection at most
// WaitTimeout.
const (
	maxHeaderBytes = 64 << 10
	maxStreams     = 8
)

var discard = log.New(io.Discard, "", 0)

// copyBuffers are the reverse proxy's copy buffers: an answer's copy takes
// one for as long as it runs. ReverseProxy's own are 32 KiB each, made per
// answer; these are as large as what a scrubber releases at a time
// (scrubRoom) and go back to a pool when the answer ends.
type copyBuffers struct{}

var copyBufferPool = sync.Pool{New: func() any { return new([scrubRoom]byte) }}

func (copyBuffers) Get() []byte { return copyBufferPool.Get().(*[scrubRoom]byte)[:] }

func (copyBuffers) Put(b []byte) {
	if len(b) == scrubRoom {
		copyBufferPool.Put((*[scrubRoom]byte)(b))
	}
}

// Serve terminates TLS from client with c.Leaf, serves its requests over
// HTTP/1.1 or HTTP/2 (as the client's ALPN chose) and forwards each, once
// checked and substituted, to the origin over TLS verified against
// c.Roots. It returns when the client connection is done and every request
// on it has finished; up and down are the request and response bytes.
func Serve(ctx context.Context, client net.Conn, c *Conn) (up, down int64) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := &broker{c: c, first: c.Upstream, conns: map[net.Conn]bool{}, slots: make(chan struct{}, maxUpstreamConns), built: c.Built}
	if b.built == nil {
		b.built = NewBuiltTokens()
	}
	if b.quarantine = c.Quarantine; b.quarantine == nil {
		b.quarantine = NewQuarantine()
	}
	b.quarantine.join(b, cancel)
	defer b.quarantine.leave(b)
	defer b.closeUpstreams()

	tc := tls.Server(client, &tls.Config{
		Certificates: []tls.Certificate{*c.Leaf},
		NextProtos:   []string{"h2", "http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	hctx, hcancel := context.WithTimeout(ctx, c.HandshakeTimeout)
	err := tc.HandshakeContext(hctx)
	hcancel()
	if err != nil {
		tc.Close()
		return 0, 0
	}

	tr := &http.Transport{
		DialTLSContext:      b.dialer("h2", "http/1.1"),
		ForceAttemptHTTP2:   true,
		DisableCompression:  true, // rewrite asks for identity; nothing is decompressed
		MaxConnsPerHost:     maxUpstreamConns,
		MaxIdleConnsPerHost: maxUpstreamConns,
		IdleConnTimeout:     c.IdleTimeout,
		// What an h2 origin may send ahead of a program that does not
		// read: Go's default window, 4 MiB a stream, let one client with a
		// zero window and 8 streams park 32 MiB per connection in egressd.
		HTTP2: &http.HTTP2Config{MaxReceiveBufferPerConnection: upstreamWindow, MaxReceiveBufferPerStream: upstreamWindow / 4},
	}
	b.idle = append(b.idle, tr)
	defer tr.CloseIdleConnections()
	// An upgrade (WebSocket) exists in HTTP/1.1 only: its origin is asked
	// over a connection that offers nothing else, or an origin that
	// prefers h2 would take it and the upgrade could not be sent.
	upgrades := &http.Transport{
		DialTLSContext:      b.dialer("http/1.1"),
		DisableCompression:  true,
		MaxConnsPerHost:     maxUpstreamConns,
		MaxIdleConnsPerHost: maxUpstreamConns,
		IdleConnTimeout:     c.IdleTimeout,
	}
	b.idle = append(b.idle, upgrades)
	defer upgrades.CloseIdleConnections()
	b.proxy = &httputil.ReverseProxy{
		Rewrite:        b.rewrite,
		Transport:      byUpgrade{plain: tr, upgrade: upgrades},
		ModifyResponse: b.modifyResponse,
		ErrorHandler:   b.upstreamError,
		ErrorLog:       discard,
		FlushInterval:  -1, // stream: a server-sent event must not wait in a buffer
		BufferPool:     copyBuffers{},
	}
	ln := newSingleListener(tc)
	connDone := make(chan struct{})
	var doneOnce sync.Once
	srv := &http.Server{
		Handler:           b,
		ReadHeaderTimeout: c.HeaderTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// What the program may send ahead of an origin that does not read:
		// Go's default, 1 MiB a connection, kept alive by PINGs, parked
		// ~2.2 MiB per brokered connection in egressd (round 22).
		HTTP2:       &http.HTTP2Config{MaxConcurrentStreams: maxStreams, MaxReceiveBufferPerConnection: clientWindow, MaxReceiveBufferPerStream: clientWindow / 4},
		ErrorLog:    discard,
		BaseContext: func(net.Listener) context.Context { return ctx },
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				doneOnce.Do(func() { close(connDone) })
			}
		},
	}
	go srv.Serve(ln)
	select {
	case <-connDone:
	case <-ctx.Done(): // the proxy is shutting down
		tc.Close()
		<-connDone
	}
	ln.Close()
	// No handler starts once the connection is done (enter refuses); a
	// hijacked (WebSocket) exchange runs on in its handler until either
	// side ends.
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.handlers.Wait()
	tc.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.up, b.down
}

// broker serves the requests of one connection.
type broker struct {
	c        *Conn
	proxy    *httputil.ReverseProxy
	handlers sync.WaitGroup

	built      *BuiltTokens
	quarantine *Quarantine
	clean      cleanFields // head fields found clean on this connection
	// slots holds one token per upstream connection open, from either
	// transport; idle are the transports, whose idle connections give
	// their slots up when the other transport needs one.
	slots chan struct{}
	idle  []interface{ CloseIdleConnections() }

	mu       sync.Mutex
	seq      uint64   // requests numbered so far
	first    net.Conn // the pinned connection, until the transport takes it
	conns    map[net.Conn]bool
	closed   bool // the client connection is done: no new request, no new dial
	up, down int64
}

// authority is what the origin is asked for: the host, and the port unless
// it is https's.
func (b *broker) authority() string {
	if b.c.Port == 443 || b.c.Port == 0 {
		return b.c.Host
	}
	return net.JoinHostPort(b.c.Host, strconv.Itoa(int(b.c.Port)))
}

func (b *broker) closeUpstreams() {
	b.mu.Lock()
	b.closed = true
	if b.first != nil {
		b.first.Close()
		b.first = nil
	}
	open := make([]net.Conn, 0, len(b.conns))
	for c := range b.conns {
		open = append(open, c)
	}
	b.mu.Unlock()
	for _, c := range open { // outside the lock: each Close takes it to leave the set
		c.Close()
	}
}

// forget drops c from the set of open upstream connections.
func (b *broker) forget(c net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.conns, c)
}

// byUpgrade sends an upgrade request by its own transport.
type byUpgrade struct{ plain, upgrade http.RoundTripper }

func (t byUpgrade) RoundTrip(r *http.Request) (*http.Response, error) {
	if httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade") {
		return t.upgrade.RoundTrip(r)
	}
	return t.plain.RoundTrip(r)
}

// dialer dials the origin offering protos in ALPN.
func (b *broker) dialer(protos ...string) func(ctx context.Context, _, _ string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) { return b.dialTLS(ctx, protos) }
}

// dialTLS hands the transport the pinned connection first, then new ones
// from Redial, each with a TLS handshake that verifies the origin's chain
// and name. A handshake that fails has written no request, so no secret.
func (b *broker) dialTLS(ctx context.Context, protos []string) (net.Conn, error) {
	release, err := b.takeSlot(ctx)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	first, closed := b.first, b.closed
	b.first = nil
	b.mu.Unlock()
	if closed {
		release()
		return nil, net.ErrClosed
	}
	if first == nil {
		if first, err = b.c.Redial(ctx); err != nil {
			release()
			return nil, &dialError{err}
		}
	}
	// The slot is given back when the connection closes, whoever closes it
	// (an origin answering "Connection: close" has the transport close it
	// after each request); the connection leaves the set first, or a
	// long-lived client connection would keep every one it ever had.
	raw := &slotConn{Conn: first, release: release}
	tc := tls.Client(raw, &tls.Config{
		ServerName: b.c.Host,
		RootCAs:    b.c.Roots,
		NextProtos: protos,
		MinVersion: tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(ctx, b.c.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, &handshakeError{err}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		tc.Close()
		return nil, net.ErrClosed
	}
	b.conns[tc] = true
	raw.release = func() { b.forget(tc); release() }
	return tc, nil
}

// takeSlot waits for one of the maxUpstreamConns slots, first asking both
// transports to close their idle connections if none is free (an idle
// HTTP/1.1 connection must not keep an upgrade waiting, nor the reverse).
func (b *broker) takeSlot(ctx context.Context) (release func(), err error) {
	select {
	case b.slots <- struct{}{}:
	default:
		for _, t := range b.idle {
			t.CloseIdleConnections()
		}
		select {
		case b.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var once sync.Once
	return func() { once.Do(func() { <-b.slots }) }, nil
}

// slotConn gives its upstream slot back on its first Close.
type slotConn struct {
	net.Conn
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

type dialError struct{ err error }

func (e *dialError) Error() string { return "dial: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

type handshakeError struct{ err error }

func (e *handshakeError) Error() string { return "origin TLS: " + e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

// singleListener yields one connection, then blocks until closed.
type singleListener struct {
	conn chan net.Conn
	done chan struct{}
	once sync.Once
	addr net.Addr
}

func newSingleListener(c net.Conn) *singleListener {
	l := &singleListener{conn: make(chan net.Conn, 1), done: make(chan struct{}), addr: c.LocalAddr()}
	l.conn <- c
	return l
}

func (l *singleListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conn:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *singleListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *singleListener) Addr() net.Addr { return l.addr }
