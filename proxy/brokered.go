package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy/broker"
	"github.com/prometheus/client_golang/prometheus"
)

// goBrokered runs a brokered tunnel on a goroutine of its own, counted
// like a spliced one (handlers, the gate, the tunnel slot until release),
// and records its close. No handshake guard: egressd is the TLS server
// here, so a second ClientHello reaches egressd, never the origin. The
// tunnel holds one of the integration's brokered slots
// (limits.max_brokered_connections), given back however serveBrokered
// ends (the client's close, an error, a reload or shutdown closing it)
// and before the close line, so a client that reads that line finds the
// slot free.
func (s *Server) goBrokered(p *policy.Policy, t *tunnel, ev audit.Event, bound []policy.Secret, replay []byte, release func()) {
	s.goTunnel(p, release, func() {
		up, down := s.serveBrokeredHolding(p, t, ev, bound, replay)
		s.recordClose(p, t, ev, up, down, 0)
	})
}

// serveBrokeredHolding is serveBrokered, giving the tunnel's brokered slot
// back when it returns, panic included.
func (s *Server) serveBrokeredHolding(p *policy.Policy, t *tunnel, ev audit.Event, bound []policy.Secret, replay []byte) (up, down int64) {
	defer s.limiter.endBrokered()
	return s.serveBrokered(p, t, ev, bound, replay)
}

// goTunnel runs body on a goroutine of its own, counted as a live tunnel
// (the handlers shutdown waits for, the global gate, the active-tunnels
// gauge) until it returns; then the tunnel's slot is released. Brokered
// tunnels start here; a spliced one ends its tunnelLife when its last
// direction does (splicing).
func (s *Server) goTunnel(p *policy.Policy, release func(), body func()) {
	life := s.beginTunnel(p, release)
	go func() {
		body()
		life.end()
	}()
}

// tunnelLife is a live tunnel's share of the server's accounting: the
// handlers shutdown waits for, the global gate, the active-tunnels gauge,
// and the tunnel's slot. end gives it back, once, when the tunnel is
// done, on whichever goroutine finishes it.
type tunnelLife struct {
	s       *Server
	active  prometheus.Gauge
	release func()
	placed  bool // it holds a place under the gate
}

func (s *Server) beginTunnel(p *policy.Policy, release func()) tunnelLife {
	l := s.beginGuardedTunnel(p, release)
	l.place()
	return l
}

// beginGuardedTunnel begins the life of a tunnel whose handshake guard
// runs on its handler, without a place under the gate: while the guard
// runs, the handler's place is the connection's. place takes the
// tunnel's own when it splices and the handler lets go.
func (s *Server) beginGuardedTunnel(p *policy.Policy, release func()) tunnelLife {
	s.handlers.Add(1)
	active := s.metrics.ActiveTunnels.WithLabelValues(integrationName(p))
	active.Inc()
	return tunnelLife{s: s, active: active, release: release}
}

func (l *tunnelLife) place() {
	l.s.opts.Gate.enter()
	l.placed = true
}

func (l *tunnelLife) end() {
	l.active.Dec()
	l.release()
	if l.placed {
		l.s.opts.Gate.leave()
	}
	l.s.handlers.Done()
}

// serveBrokered runs a tunnel to a host a secret is bound to (issue 15):
// egressd terminates the client's TLS with a leaf for the host and
// forwards each request, checked and substituted, over TLS to the origin
// it verifies itself, on the pinned connection already dialled. replay is
// what was read from the client (the ClientHello and anything after it).
// Every request is one audit event; the tunnel's close event follows.
func (s *Server) serveBrokered(p *policy.Policy, t *tunnel, connect audit.Event, bound []policy.Secret, replay []byte) (up, down int64) {
	set := s.settings()
	leaf, err := s.leaves.Leaf(t.host.String())
	if err != nil {
		t.abort()
		refused := connect
		s.refusedAfterConnect(&refused, policy.BrokerUnavailable, audit.Cap(err.Error(), 200))
		return 0, 0
	}
	var unbound []policy.Secret
	for _, sec := range p.Secrets() {
		if !sec.BoundTo(t.host) {
			unbound = append(unbound, sec)
		}
	}
	c := &broker.Conn{
		Host: t.host.String(), Port: t.port, Leaf: leaf, Roots: s.opts.Broker.UpstreamRoots,
		Bound: bound, Unbound: unbound,
		Secrets:          func() []policy.Secret { return s.secretsInForce(p) },
		Upstream:         t.upstream,
		Redial:           func(ctx context.Context) (net.Conn, error) { return s.redial(ctx, t) },
		Record:           func(r broker.Request) error { return s.recordRequest(p, t, connect, r) },
		Outcome:          func(r broker.Request) { s.recordOutcome(p, t, connect, r) },
		Admit:            func() policy.Reason { return s.admitBrokered(t) },
		Sentence:         func(r policy.Reason) string { return brokeredSentence(r, t, p) },
		HandshakeTimeout: set.timeouts.ClientHello,
		HeaderTimeout:    set.timeouts.RequestHeader,
		IdleTimeout:      set.timeouts.Idle,
		WaitTimeout:      set.timeouts.Dial,
		Built:            s.builtTokens(integrationName(p)),
		Quarantine:       s.quarantine(),
	}
	client := &replayConn{Conn: t.client, r: io.MultiReader(bytes.NewReader(replay), t.client)}
	return broker.Serve(s.baseCtx, client, c)
}

// secretsInForce are the secrets of the integration's policy now, or
// those of p (the policy the tunnel opened under) if it has none loaded.
func (s *Server) secretsInForce(p *policy.Policy) []policy.Secret {
	if now := s.opts.Registry.Policy(s.opts.Key); now != nil {
		return now.Secrets()
	}
	return p.Secrets()
}

// brokeredSentence is the line a refused brokered request answers with.
func brokeredSentence(r policy.Reason, t *tunnel, p *policy.Policy) string {
	switch r {
	case policy.MethodNotAllowed:
		return "egressd: a tunnel (CONNECT) inside a connection egressd decrypts to add a secret is not allowed"
	case policy.LimitExceeded:
		return "egressd: too many requests on connections egressd adds a secret to (limits.requests_per_second); retry later"
	case policy.BadRequest:
		return "egressd: with the secrets' values in place this request's header would be too large (at most 16 KiB around the placeholders in a header value, 3 KiB in a Basic credential, 4 Basic credentials carrying one, 64 KiB added by the values in all); send each placeholder once, in a short value"
	case policy.Timeout:
		return "egressd: the requests of one connection egressd adds a secret to reach the origin over at most 2 connections, and none became free in time (timeouts.dial); retry, or send fewer requests at once"
	}
	return policy.Sentence(policy.Decision{Reason: r, Host: t.host, Port: t.port}, p)
}

// builtTokens is the store of Basic tokens built for an integration's
// brokered connections: an origin that stored one on one connection may
// show it back on another. One store per integration name, bounded
// (broker.BuiltTokens), kept in memory for the process's life.
func (s *Server) builtTokens(integration string) *broker.BuiltTokens {
	s.builtMu.Lock()
	defer s.builtMu.Unlock()
	if s.built == nil {
		s.built = map[string]*broker.BuiltTokens{}
	}
	t := s.built[integration]
	if t == nil {
		t = broker.NewBuiltTokens()
		s.built[integration] = t
	}
	return t
}

// quarantine is an integration's brokering quarantine: one per manifest,
// kept in memory for the process's life, so a tripped one holds until
// egressd restarts (broker.Quarantine).
func (s *Server) quarantine() *broker.Quarantine {
	o := s.opts.Broker
	o.quarantineMu.Lock()
	defer o.quarantineMu.Unlock()
	if o.quarantines == nil {
		o.quarantines = map[string]*broker.Quarantine{}
	}
	q := o.quarantines[s.opts.Key]
	if q == nil {
		q = broker.NewQuarantine()
		o.quarantines[s.opts.Key] = q
	}
	return q
}

// redial opens another connection to the brokered tunnel's address, by the
// same path as the first: the current policy must still allow the tunnel,
// the address is checked again at connect(2), and the connection must not
// have reached this host. It never resolves the name again.
func (s *Server) redial(ctx context.Context, t *tunnel) (net.Conn, error) {
	p := s.opts.Registry.Policy(s.opts.Key)
	if p == nil || !stillAllowed(p, t) {
		return nil, fmt.Errorf("%s is no longer allowed", t.host)
	}
	c, err := dialPinned(ctx, t.addr, s.settings().timeouts.Dial, func(a netip.Addr) bool { return s.checkAddrNow(p, a).Verdict.Permits() })
	if err != nil {
		return nil, err
	}
	local := c.LocalAddr().(*net.TCPAddr).AddrPort()
	if dd := p.CheckDialled(local.Addr(), t.addr.Addr()); !dd.Verdict.Permits() {
		c.Close()
		return nil, fmt.Errorf("connection to %s refused: %s", t.addr, dd.Reason)
	}
	return c, nil
}

// admitBrokered refuses a brokered request, like a connection, when the
// audit log cannot be written and the operator chose to deny then, and
// past the integration's request rate (limits.requests_per_second): each
// request is an audit line, so the rate bounds the log's growth too; and
// when the policy in force no longer allows the tunnel as it opened.
func (s *Server) admitBrokered(t *tunnel) policy.Reason {
	if !s.opts.Audit.Healthy() && s.settings().onFailure == policy.DenyOnAuditFailure {
		return policy.AuditUnavailable
	}
	// Judged against the policy in force now, as Redecide will judge the
	// tunnel: a reload stores the new policy before Redecide closes what it
	// narrowed, and a request in between must not carry a value to a host
	// the reload unbound.
	switch now := s.opts.Registry.Policy(s.opts.Key); {
	case now == nil:
		return policy.IntegrationRemoved
	case !stillAllowed(now, t):
		return policy.PolicyNarrowed
	}
	if !s.limiter.allowBrokered() {
		return policy.LimitExceeded
	}
	return ""
}

// recordRequest writes one brokered request's event: for a request about
// to be sent, before it is (no status yet: its outcome follows as a
// response event with the same conn and req); for one refused before it
// reached the origin, its only event. The secrets are named, never valued;
// the path is kept without its query. A refused request is folded like a
// refused connection (by reason and host), so a flood of them writes
// bounded lines; an allowed one is always a line of its own, the record of
// where a secret went, bounded by the request rate. An error means the
// request must not be sent (the audit log failed and the operator chose to
// deny then).
func (s *Server) recordRequest(p *policy.Policy, t *tunnel, connect audit.Event, r broker.Request) error {
	ev := s.requestEvent(p, t, connect, audit.Request, r)
	ev.Method, ev.Path, ev.Secrets = audit.Cap(r.Method, 16), r.Path, r.Secrets
	// Not a connection decision: the decisions metric counts CONNECTs only.
	write := s.opts.Audit.Write
	if r.Reason != "" && s.opts.Suppress != nil {
		write = s.opts.Suppress.Write
	}
	return s.writeRequestEvent(t, write, ev)
}

// recordOutcome writes the outcome of a request recordRequest recorded as
// sent: status, bytes, and why it ended early. Always a line of its own:
// there is one per request sent, bounded by the request rate.
func (s *Server) recordOutcome(p *policy.Policy, t *tunnel, connect audit.Event, r broker.Request) {
	s.writeRequestEvent(t, s.opts.Audit.Write, s.requestEvent(p, t, connect, audit.Response, r))
}

// requestEvent is what a request's and a response's event share.
func (s *Server) requestEvent(p *policy.Policy, t *tunnel, connect audit.Event, kind audit.Kind, r broker.Request) audit.Event {
	ev := s.baseEvent(p)
	ev.Kind, ev.Conn, ev.Req, ev.Host, ev.Port, ev.Addr = kind, t.conn, r.Seq, connect.Host, connect.Port, connect.Addr
	ev.Status, ev.BytesUp, ev.BytesDown = r.Status, r.Up, r.Down
	ev.Decision = connect.Decision
	if r.Reason != "" {
		ev.Decision, ev.Reason = "deny", string(r.Reason)
	}
	ev.Err = audit.Cap(r.Err, 200)
	return ev
}

// writeRequestEvent writes ev; when that fails and the operator chose to
// deny then, it closes the tunnel (no further request without a record)
// and returns the error.
func (s *Server) writeRequestEvent(t *tunnel, write func(audit.Event) error, ev audit.Event) error {
	err := write(ev)
	if err != nil && s.settings().onFailure == policy.DenyOnAuditFailure {
		t.closeWith(policy.AuditUnavailable)
		return err
	}
	return nil
}

// secretsPrint identifies the secrets bound to a host (names, hosts,
// placeholders and values), so a reload that changes any of them closes
// the tunnels they were brokered on. It is a digest, held in memory only.
func secretsPrint(bound []policy.Secret) string {
	if len(bound) == 0 {
		return ""
	}
	h := sha256.New()
	for _, sec := range bound {
		hosts := make([]string, len(sec.Hosts))
		for i, e := range sec.Hosts {
			hosts[i] = e.String()
		}
		fmt.Fprintf(h, "%q %q %q %x\n", sec.Name, strings.Join(hosts, ","), sec.Placeholder, sec.Value)
	}
	return string(h.Sum(nil))
}

// replayConn reads what was already read from the client first.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }
