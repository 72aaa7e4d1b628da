package proxy

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy/broker"
	"github.com/elazarl/goproxy"
)

// Options configure one listener's proxy. Nil hooks have stated defaults.
type Options struct {
	// Key is the integration's key in Registry: the listener is the
	// integration's identity.
	Key      string
	Registry *policy.Registry
	// Resolver resolves allowed names. Required.
	Resolver *Resolver
	// Audit receives every decision. Required.
	Audit *audit.Log
	// Suppress folds repeated denials; nil means every denial is a line.
	Suppress *audit.Suppressor
	// Metrics; nil means none are recorded.
	Metrics        *Metrics
	Limits         policy.Limits
	Timeouts       policy.Timeouts
	OnAuditFailure policy.OnFailure
	// Gate is the global connection cap shared by every listener; nil
	// means no global cap.
	Gate *Gate
	// Broker terminates TLS for hosts a secret is bound to (issue 15); nil
	// means no secret may be bound, and a policy that binds one is refused.
	Broker *BrokerOptions
}

// BrokerOptions are what brokering needs beyond the policy's secrets.
type BrokerOptions struct {
	CA *broker.CA
	// UpstreamRoots verify origins; nil means the system roots.
	UpstreamRoots *x509.CertPool

	// quarantines holds each integration's brokering quarantine, by its
	// manifest (Options.Key): here, not on a Server, so that a listener
	// opened again for the integration finds it tripped. The options live
	// as long as the process (a reload keeps them).
	quarantineMu sync.Mutex
	quarantines  map[string]*broker.Quarantine
}

// Server is the CONNECT proxy for one integration on one listener. It is
// built on goproxy, with every default that would accept overridden: no
// CONNECT is accepted by goproxy itself, no request is forwarded, no dialer
// reads HTTPS_PROXY.
type Server struct {
	opts    Options
	limiter *limiter
	tunnels tunnels
	http    *http.Server
	gp      *goproxy.ProxyHttpServer
	metrics *Metrics
	routes  *routeCache    // which addresses the kernel delivers to this host
	leaves  *broker.Leaves // nil without a broker
	// built holds each integration's Basic tokens the broker built
	// (builtTokens); by integration name.
	builtMu sync.Mutex
	built   map[string]*broker.BuiltTokens

	connPrefix string
	connSeq    atomic.Uint64
	handlers   sync.WaitGroup // CONNECT handlers running, tunnels included
	slots      sync.Map       // net.Conn -> *pending: accepted, tunnel not started
	current    atomic.Pointer[settings]
	served     atomic.Pointer[policy.Policy] // in force at the last accept: see accepted
	baseCtx    context.Context
	cancel     context.CancelFunc
	sweepOnce  sync.Once

	mu        sync.Mutex
	listeners []net.Listener // every listener served, closed by Shutdown
	closing   bool           // Shutdown is waiting for handlers: no new one may start

	stoppedAccepting atomic.Bool
	unseenDirect     atomic.Uint64 // egress0's drops audited so far, see RefuseDirectUnseen
}

// startHandler counts a connection's handler in, or reports false once
// Shutdown has begun waiting for them (a WaitGroup must not go up from
// zero while someone waits on it).
func (s *Server) startHandler() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.handlers.Add(1)
	return true
}

func (s *Server) trackListener(ln net.Listener) {
	s.mu.Lock()
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
}

// New builds a Server.
func New(opts Options) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		opts:       opts,
		limiter:    newLimiter(opts.Limits),
		metrics:    opts.Metrics,
		routes:     newRouteCache(),
		connPrefix: randomHex(4),
		baseCtx:    ctx,
		cancel:     cancel,
	}
	s.current.Store(&settings{limits: opts.Limits, timeouts: opts.Timeouts, onFailure: opts.OnAuditFailure})
	if s.metrics == nil {
		s.metrics = NewMetrics(nil)
	}
	if opts.Broker != nil && opts.Broker.CA != nil {
		s.leaves = broker.NewLeaves(opts.Broker.CA)
	}
	s.gp = s.newGoproxy()
	// No ReadHeaderTimeout: the request-header clock starts at accept (see
	// admit), where a reload can change it.
	s.http = &http.Server{
		Handler:                      s,
		MaxHeaderBytes:               maxHeaderBytes,
		DisableGeneralOptionsHandler: true, // OPTIONS * gets our 405, not Go's 200
		ConnState:                    s.connState,
		ErrorLog:                     log.New(io.Discard, "", 0),
		BaseContext:                  func(net.Listener) context.Context { return ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	s.http.SetKeepAlivesEnabled(false) // one request per connection: no keep-alive after a denial
	return s
}

// maxHeaderBytes bounds the CONNECT request head. net/http adds 4 KiB of
// slack to MaxHeaderBytes, so 4 KiB here refuses heads past about 8 KiB.
const maxHeaderBytes = 4 << 10

func (s *Server) newGoproxy() *goproxy.ProxyHttpServer {
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = log.New(io.Discard, "", 0)
	gp.ConnectDial = nil // never dial from HTTPS_PROXY
	gp.Tr = &http.Transport{Proxy: nil, DialContext: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("egressd forwards nothing but CONNECT")
	}}
	gp.NonproxyHandler = http.HandlerFunc(s.refuseMethod)
	// Every CONNECT is hijacked into handleConnect, which decides. goproxy's
	// own default (accept) is never reached.
	gp.OnRequest().HandleConnectFunc(func(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: s.hijacked}, host
	})
	// Absolute-form requests (GET http://…) are answered here, never sent.
	gp.OnRequest().DoFunc(func(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		return r, s.methodResponse(r)
	})
	return gp
}

// Serve accepts connections on ln until Shutdown. ln's connections must be
// *net.TCPConn or *net.UnixConn for the tunnel to splice.
func (s *Server) Serve(ln net.Listener) error {
	s.sweepOnce.Do(func() { go s.sweepLoop() })
	s.trackListener(ln)
	err := s.http.Serve(admitListener{Listener: ln, s: s})
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) && s.stoppedAccepting.Load() {
		return nil
	}
	return err
}

// StopAccepting closes the listeners at once, so their addresses are free
// for others, while the connections already accepted go on until
// Shutdown drains them.
func (s *Server) StopAccepting() {
	s.stoppedAccepting.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ln := range s.listeners {
		ln.Close()
	}
}

// Shutdown stops accepting, lets open tunnels drain until ctx is done, then
// closes the rest. It returns the number of tunnels closed at the deadline.
func (s *Server) Shutdown(ctx context.Context) int {
	s.mu.Lock()
	for _, ln := range s.listeners {
		ln.Close()
	}
	s.mu.Unlock()
	s.http.Shutdown(ctx)
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.handlers.Wait(); close(done) }()
	closed := 0
	select {
	case <-done:
	case <-ctx.Done():
		s.tunnels.each(func(t *tunnel) { closed++; t.closeWith(policy.Timeout) })
		s.cancel() // handshakes still resolving or dialling give up too
		<-done
	}
	s.cancel() // ends the sweeper
	s.routes.Close()
	return closed
}

// OpenTunnels returns the number of tunnels now open.
func (s *Server) OpenTunnels() int { return s.tunnels.len() }

// Redecide re-judges every open tunnel against the current policy (host,
// port, operator globs and the dialled address) and closes, with reason
// policy_narrowed, those no longer allowed. Call it after a reload.
func (s *Server) Redecide() {
	p := s.opts.Registry.Policy(s.opts.Key)
	s.tunnels.each(func(t *tunnel) {
		if p == nil || !stillAllowed(p, t) {
			t.closeWith(policy.PolicyNarrowed)
		}
	})
}

func stillAllowed(p *policy.Policy, t *tunnel) bool {
	return p.Decide(t.host.String(), t.port).Verdict.Permits() && p.CheckAddr(t.addr.Addr()).Verdict.Permits() &&
		secretsPrint(p.SecretsFor(t.host)) == t.secrets && // a binding added, changed or removed: broker anew, or splice
		(t.secrets == "" || secretsPrint(p.Secrets()) == t.allSecrets) // brokered: any value its answers are scrubbed of
}

func (s *Server) sweepLoop() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-s.baseCtx.Done():
			return
		case now := <-tick.C:
			t := s.settings().timeouts
			s.tunnels.sweep(now, t.Idle, t.Lifetime)
			if s.opts.Suppress != nil {
				s.opts.Suppress.Flush(false)
			}
		}
	}
}

// stashKey finds, from the request, where ServeHTTP keeps the hijacked
// connection's bufio.Reader.
type stashKey struct{}

type stash struct{ br *bufio.Reader }

// stashWriter records the bufio.Reader net/http hands out on Hijack.
// goproxy's ConnectHijack passes on only the raw connection, dropping bytes
// the client pipelined after the CONNECT head; keeping the reader here saves
// them, and the connection itself stays raw so splice still works.
type stashWriter struct {
	http.ResponseWriter
	st *stash
}

func (w stashWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := w.ResponseWriter.(http.Hijacker).Hijack()
	if err == nil {
		w.st.br = rw.Reader
	}
	return c, rw, err
}

// ServeHTTP hands every request to goproxy, which routes CONNECT to
// handleConnect and everything else to a 405.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := r.Context().Value(connKey{})
	s.requestArrived(c)
	if g, ok := c.(*headGuard); ok {
		g.hand() // from here on, every answer is egressd's own
	}
	if r.Method != http.MethodConnect && hasBody(r) {
		resp := s.methodResponse(r)
		defer resp.Body.Close()
		if c, ok := answerAndClose(w, resp); ok {
			s.releaseSlot(c) // hijacked: net/http no longer reports its close
			s.opts.Gate.leave()
			return
		}
		s.writeResponse(w, resp)
		return
	}
	st := &stash{}
	r = r.WithContext(context.WithValue(r.Context(), stashKey{}, st))
	s.gp.ServeHTTP(stashWriter{ResponseWriter: w, st: st}, r)
}

func (s *Server) hijacked(r *http.Request, client net.Conn, _ *goproxy.ProxyCtx) {
	var br *bufio.Reader
	if st, _ := r.Context().Value(stashKey{}).(*stash); st != nil && st.br != nil {
		br = st.br // net/http's reader, holding what the client pipelined
	} else {
		br = bufio.NewReader(client) // only when net/http's Hijack was not ours
	}
	defer s.opts.Gate.leave()
	defer s.releaseSlot(client) // the slot is the accepted (guarded) connection's
	client = unguard(client)
	if !s.startHandler() {
		client.Close() // shutting down
		return
	}
	defer s.handlers.Done()
	s.handleConnect(r, client, br)
}

// connKey finds the request's connection in its context.
type connKey struct{}

// connState counts connections from accept, and notices the ones net/http
// closes before a handler runs (a malformed request line, headers over the
// limit, a client too slow to send them): those never reach the audit log
// otherwise.
func (s *Server) connState(c net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		s.opts.Gate.enter()
	case http.StateClosed:
		s.opts.Gate.leave()
		if s.releaseSlot(c) {
			var t requestTarget
			if g, ok := c.(*headGuard); ok {
				t = g.line.target()
			}
			s.preHandlerRejected("connection closed before a complete request (malformed, headers too large, or too slow)", t)
		}
	}
}

// preHandlerRejected records a connection refused before egressd's
// handler had its request, naming what its request line asked for.
func (s *Server) preHandlerRejected(why string, t requestTarget) {
	p := s.opts.Registry.Policy(s.opts.Key)
	s.metrics.PreHandler.WithLabelValues(integrationName(p)).Inc()
	ev := s.baseEvent(p)
	ev.Decision, ev.Reason = "deny", string(policy.BadRequest)
	ev.Msg = why
	t.name(&ev)
	s.recordDenial(ev)
}

func (s *Server) nextConnID() string {
	return "c-" + s.connPrefix + "-" + strconv.FormatUint(s.connSeq.Add(1), 36)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
