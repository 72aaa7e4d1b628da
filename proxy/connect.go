package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// handleConnect serves one CONNECT; its raw request target is the target.
// One in origin form ("CONNECT /") names no target: it is refused as a bad
// request, named by the Host it sent, as a refused "GET /" is.
func (s *Server) handleConnect(r *http.Request, client net.Conn, br *bufio.Reader) {
	if strings.HasPrefix(r.RequestURI, "/") {
		p := s.opts.Registry.Policy(s.opts.Key)
		ev := s.baseEvent(p)
		ev.Conn, ev.Method = s.nextConnID(), "CONNECT"
		nameRefusedRequest(&ev, r)
		s.refuse(client, p, policy.Decision{Reason: policy.BadRequest}, &ev, explicit)
		return
	}
	s.serveTarget(client, br, r.RequestURI, explicit)
}

// arrival is how a connection reached egressd.
type arrival uint8

const (
	// explicit: an HTTP CONNECT; refusals are HTTP answers.
	explicit arrival = iota
	// captured: a connection to a synthetic address inside a sandbox; there
	// is no HTTP, so a refusal is a close.
	captured
)

// serveTarget takes a connection that asked for target ("host:port") from
// decision to close, in the order DESIGN.md fixes: parse the raw target and
// decide (a denied name is never resolved); resolve and check every
// address; dial the checked address; answer 200 only once connected; check
// the ClientHello; replay and splice. It writes one connect event for the
// outcome and, for a tunnel, one close event. br holds what was already
// read from client.
func (s *Server) serveTarget(client net.Conn, br *bufio.Reader, target string, how arrival) {
	p := s.opts.Registry.Policy(s.opts.Key)
	ev := s.baseEvent(p)
	ev.Conn, ev.HostRaw = s.nextConnID(), target
	ev.Method = "CONNECT"
	if how == captured {
		ev.Method = "captured"
	}
	// brokered: the connection holds one of the integration's brokered
	// slots (a bound host); it goes back before a refusal is answered or
	// recorded, so a client that sees the refusal finds the slot free,
	// or to goBrokered at the hand-off.
	brokered := false
	freeBrokered := func() {
		if brokered {
			brokered = false
			s.limiter.endBrokered()
		}
	}
	defer freeBrokered()
	refuse := func(d policy.Decision) { freeBrokered(); s.refuse(client, p, d, &ev, how) }
	set := s.settings()
	deadline := time.Now().Add(set.timeouts.DNS + set.timeouts.Dial)
	client.SetDeadline(deadline)

	if reason := s.admission(p, set); reason != "" {
		if reason == policy.IntegrationRemoved {
			requestTarget{method: ev.Method, raw: target}.name(&ev) // what it asked for, reported under its id
		}
		refuse(policy.Decision{Reason: reason})
		return
	}
	defer s.releaseSlot(client) // the handshake is over, whatever its outcome

	d := p.DecideTarget(target)
	ev.Host, ev.Port, ev.Rule, ev.Exemption = d.Host.String(), d.Port, d.Rule, d.Exemption
	if !d.Verdict.Permits() {
		refuse(d)
		return
	}
	bound := p.SecretsFor(d.Host)
	if len(bound) > 0 && s.leaves == nil {
		// The operator asked for a secret to be added here: splicing would
		// send the placeholder instead, so fail closed.
		refuse(policy.Decision{Reason: policy.BrokerUnavailable, Host: d.Host, Port: d.Port})
		return
	}
	// A brokered connection costs up to a MiB where a spliced one costs a
	// few KiB: its own cap is taken before any work is done for it.
	if len(bound) > 0 {
		if !s.takeBrokeredSlot(client, p, d, &ev, how) {
			return
		}
		brokered = true
	}
	ctx, cancel := context.WithDeadline(s.baseCtx, deadline)
	defer cancel()
	addrs, refused := s.resolveChecked(ctx, p, d, &ev)
	if refused != nil {
		refuse(*refused)
		return
	}
	upstream, addr, err := dialFirst(ctx, addrs, d.Port, set.timeouts.Dial, func(a netip.Addr) bool { return p.CheckAddr(a).Verdict.Permits() })
	if err != nil {
		ev.Err = audit.Cap(err.Error(), 200)
		refuse(policy.Decision{Reason: policy.DialError, Host: d.Host, Port: d.Port})
		return
	}
	ev.Addr = addr.String()
	local := upstream.LocalAddr().(*net.TCPAddr).AddrPort()
	if dd := p.CheckDialled(local.Addr(), addr.Addr()); !dd.Verdict.Permits() {
		upstream.Close() // it reached this host after all: an address added since the list was read
		refuse(policy.Decision{Reason: dd.Reason, Rule: dd.Rule, Host: d.Host, Port: d.Port})
		return
	}
	if !s.limiter.startTunnel() {
		upstream.Close()
		refuse(policy.Decision{Reason: policy.LimitExceeded, Host: d.Host, Port: d.Port})
		return
	}
	t := &tunnel{conn: ev.Conn, client: client, upstream: upstream, host: d.Host, port: d.Port, addr: addr, started: time.Now(), secrets: secretsPrint(bound)}
	if len(bound) > 0 {
		t.allSecrets = secretsPrint(p.Secrets()) // its answers are scrubbed of every secret's value
	}
	s.tunnels.add(t) // before the generation check, so a reload cannot miss it
	release := func() { s.tunnels.remove(t); s.limiter.endTunnel() }
	handedOff := false
	defer func() {
		if !handedOff {
			release()
		}
	}()
	if cur := s.opts.Registry.Policy(s.opts.Key); cur != p && (cur == nil || !stillAllowed(cur, t)) {
		upstream.Close()
		refuse(policy.Decision{Reason: policy.PolicyNarrowed, Host: d.Host, Port: d.Port})
		return
	}

	if how == explicit {
		client.SetWriteDeadline(time.Now().Add(set.timeouts.ClientHello))
		if _, err := client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
			freeBrokered()
			t.abort()
			s.refusedAfterConnect(&ev, policy.Timeout, "client went away before 200")
			return
		}
	}
	client.SetDeadline(time.Now().Add(set.timeouts.ClientHello))
	raw, sni, err := ReadClientHello(br)
	if reason := helloReason(err, sni, d.Host); reason != "" {
		freeBrokered()
		t.abort()
		if reason == policy.SNIMismatch && sni != (allowlist.Name{}) {
			ev.SNI = sni.String() // where the client really meant to go
		}
		ev.SNIRaw = rawServerName(err) // where it meant to go, when that is no host name
		s.refusedAfterConnect(&ev, reason, errString(err))
		return
	}
	client.SetDeadline(time.Time{})

	ev.Decision, ev.Reason = d.Verdict.String(), string(d.Reason)
	if len(bound) > 0 {
		ev.Msg = "brokered: TLS terminated by egressd, secrets added per request"
	}
	if err := s.record(p, ev); err != nil && set.onFailure == policy.DenyOnAuditFailure {
		freeBrokered()
		t.abort() // nothing is allowed without a record
		return
	}
	if len(bound) > 0 {
		handedOff, brokered = true, false // goBrokered gives the slot back
		s.goBrokered(p, t, ev, bound, append(raw, drain(br)...), release)
		return
	}
	// The handler goes on with the tunnel's handshake guard itself, and
	// hands the tunnel to two fresh goroutines once it splices: handing the
	// guard to a goroutine of its own cost a scheduling round on the way
	// to the origin's answer. Until then the connection holds the
	// handler's place under the gate; the tunnel takes its own when it
	// splices. What the client sent behind the hello stays in br:
	// guardHandshake checks it before it goes upstream.
	handedOff = true
	job := &splicing{s: s, p: p, t: t, ev: &ev, raw: raw, br: br, wait: set.timeouts.ClientHello, life: s.beginGuardedTunnel(p, release)}
	// The hello leaves from here, right behind its record. The handshake
	// slot goes first: an origin that does not read holds the tunnel
	// (until the sweeper closes it), never a slot.
	s.releaseSlot(client)
	cancel() // the dial is done: its deadline's timer goes now, not when the tunnel splices
	job.up0, job.sent = t.sendHello(raw)
	job.run()
}

// splicing is a spliced tunnel's work after its connect record: check the
// rest of the client's handshake on the handler's goroutine, then splice
// each direction on a fresh goroutine (tunnel.start) and let the handler
// go, and record the close when both directions are done.
// An idle tunnel is then two goroutines parked in splice with nothing
// under them: the runtime never shrinks a stack below four times what it
// holds plus 800 bytes, so the goroutine whose stack the handshake grew
// would stay at 4 KiB or more for the tunnel's whole life. What stays
// reachable from splicing is dropped once checked, keeping only the few
// fields of the connect event the close record needs (tunnel.closing).
type splicing struct {
	s          *Server
	p          *policy.Policy
	t          *tunnel
	ev         *audit.Event
	raw        []byte
	br         *bufio.Reader
	wait       time.Duration
	life       tunnelLife
	up0, down0 int64            // moved by sendHello and the handshake guard
	sent       handshakeRefusal // why the hello could not be sent, if it could not
	splicers   splicers         // the two directions' state, here to save an allocation
}

func (j *splicing) run() {
	if !j.guard() {
		j.life.end()
		return
	}
	j.life.place()
	j.t.start(j.replay(), &j.splicers, j)
}

// tunnelEnded records the close of a tunnel that spliced, then ends its life.
func (j *splicing) tunnelEnded(up, down int64) {
	j.s.recordClosing(j.p, j.t, j.up0+up, j.down0+down)
	j.life.end()
}

// guard runs the tunnel's handshake guard and, if it refuses, records the
// refusal and the close.
func (j *splicing) guard() bool {
	no := j.sent
	if no.reason == "" {
		var up int64
		up, j.down0, no = j.t.guardHandshake(j.br, j.wait)
		j.up0 += up
	}
	if no.reason != "" {
		j.s.refuseHandshake(j.p, j.t, j.ev, no, j.up0, j.down0, int64(len(j.raw)))
		return false
	}
	j.t.closing = closingOf(j.ev)
	j.ev, j.raw = nil, nil
	return true
}

// replay is what the client sent behind what the guard checked, and lets
// the reader go.
func (j *splicing) replay() []byte {
	b := drain(j.br)
	j.br = nil
	return b
}

// refuseHandshake records a tunnel the handshake guard refused, and its
// close.
func (s *Server) refuseHandshake(p *policy.Policy, t *tunnel, ev *audit.Event, no handshakeRefusal, up, down, hello int64) {
	t.closeWith(no.reason)
	refused := *ev
	if !no.sni.IsZero() {
		refused.SNI = no.sni.String() // where the client really meant to go
	}
	refused.SNIRaw = no.sniRaw
	s.refusedAfterAllow(&refused, no.reason, no.msg)
	s.recordClose(p, t, *ev, up, down, hello)
}

// closing is what a spliced tunnel's close record takes from its connect
// event, kept on the tunnel so the event itself can go.
type closing struct {
	host, addr, decision, exemption string
	port                            uint16
}

func closingOf(ev *audit.Event) closing {
	return closing{host: ev.Host, addr: ev.Addr, decision: ev.Decision, exemption: ev.Exemption, port: ev.Port}
}

// recordClosing writes the close record of a tunnel that spliced.
func (s *Server) recordClosing(p *policy.Policy, t *tunnel, up, down int64) {
	c := &t.closing
	s.recordClose(p, t, audit.Event{Host: c.host, Port: c.port, Addr: c.addr, Decision: c.decision, Exemption: c.exemption}, up, down, 0)
}

// admission applies the checks that come before looking at the target:
// the audit log must be writable, and the request within the rate. The
// connection holds its handshake slot since accept.
func (s *Server) admission(p *policy.Policy, set *settings) policy.Reason {
	if p == nil {
		if s.opts.Registry.NotLoaded(s.opts.Key) != "" {
			return policy.ManifestNotLoaded
		}
		return policy.IntegrationRemoved // the integration was removed; its listener is closing
	}
	if !s.opts.Audit.Healthy() && set.onFailure == policy.DenyOnAuditFailure {
		return policy.AuditUnavailable
	}
	if !s.limiter.allowRequest() {
		return policy.LimitExceeded
	}
	return ""
}

// resolveChecked resolves an allowed name and checks every address. Any
// address outside the public internet denies the whole answer: an attacker
// who controls the zone can mix a private address in with public ones. An
// address the kernel would deliver to this host is checked too, by asking
// the kernel its route (routedHere).
func (s *Server) resolveChecked(ctx context.Context, p *policy.Policy, d policy.Decision, ev *audit.Event) ([]netip.Addr, *policy.Decision) {
	ans, err := s.opts.Resolver.ResolveFor(ctx, s.opts.Key, d.Host)
	ev.CNAME = ans.CNAMEs
	if err != nil {
		ev.Err = audit.Cap(err.Error(), 200)
		return nil, &policy.Decision{Reason: policy.DNSError, Host: d.Host, Port: d.Port}
	}
	exemption := ev.Exemption
	for _, a := range ans.Addrs {
		c := s.checkAddrNow(p, a)
		if !c.Verdict.Permits() {
			// The refusal keeps the manifest entry that allowed the
			// name unless an operator rule decided it, so a report
			// counts the attempt at that entry.
			ev.Addr = a.String()
			rule := d.Rule
			if c.Rule != "" {
				rule = c.Rule
			}
			return nil, &policy.Decision{Reason: c.Reason, Rule: rule, Host: d.Host, Port: d.Port}
		}
		if c.Exemption != "" && !strings.Contains(exemption, c.Exemption) {
			exemption = strings.TrimPrefix(exemption+","+c.Exemption, ",")
		}
	}
	ev.Exemption = exemption
	return ans.Addrs, nil
}

// checkAddrNow judges a as CheckAddr does and, when the kernel would
// deliver it to this host as things stand now, as CheckRoutedHere does.
// Every dial egressd makes for an integration goes through it. The route
// comes from s.routes, which is as current as asking the kernel.
func (s *Server) checkAddrNow(p *policy.Policy, a netip.Addr) policy.Decision {
	c := p.CheckAddr(a)
	if !c.Verdict.Permits() {
		return c
	}
	if here, err := s.routes.routedHere(a); here || err != nil {
		if r := p.CheckRoutedHere(a, err); !r.Verdict.Permits() {
			return r
		}
	}
	return c
}

// drain returns, and consumes, what br holds already read.
func drain(br *bufio.Reader) []byte {
	n := br.Buffered()
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	br.Read(b)
	return b
}

// helloReason compares the ClientHello's server_name with the CONNECT host.
func helloReason(err error, sni, host allowlist.Name) policy.Reason {
	var he *HelloError
	if errors.As(err, &he) {
		return he.Reason
	}
	if err != nil {
		return policy.NotTLS
	}
	if sni != host {
		return policy.SNIMismatch
	}
	return ""
}

// refuse answers a connection that will not be tunnelled, records it, and
// closes it. A CONNECT gets an HTTP answer; a captured connection, which
// spoke no HTTP, is just closed.
func (s *Server) refuse(client net.Conn, p *policy.Policy, d policy.Decision, ev *audit.Event, how arrival) {
	ev.Decision, ev.Reason = "deny", string(d.Reason)
	if d.Rule != "" {
		ev.Rule = d.Rule
	}
	sentence := policy.Sentence(d, p)
	if d.Reason == policy.ManifestNotLoaded {
		// The audit log keeps the operator's full message; the client
		// gets its class only (Registry.NotLoadedToClient).
		ev.Manifest, ev.Err = s.opts.Key, audit.Cap(s.opts.Registry.NotLoaded(s.opts.Key), 500)
		sentence = policy.NotLoadedSentence(s.opts.Registry.NotLoadedToClient(s.opts.Key))
	}
	s.refuseSaying(client, d, ev, how, sentence)
}

// refuseSaying records a refusal decided before the 200 and answers it
// with sentence (a captured connection is closed).
func (s *Server) refuseSaying(client net.Conn, d policy.Decision, ev *audit.Event, how arrival, sentence string) {
	ev.Decision, ev.Reason = "deny", string(d.Reason)
	// The handshake slot goes back before the answer: a client that reads
	// its refusal and connects again never finds its own slot still taken
	// (with few slots, that next connection was closed at accept).
	s.releaseSlot(client)
	s.recordDenial(*ev)
	if how == captured {
		client.Close()
		return
	}
	writeAndClose(client, refusal(d.Reason, sentence))
}

// takeBrokeredSlot takes one of the integration's brokered connection
// slots for a tunnel to a host a secret is bound to, or refuses the
// CONNECT (limit_exceeded, naming the cap) and reports false. A true
// result must be paired with limiter.endBrokered.
func (s *Server) takeBrokeredSlot(client net.Conn, p *policy.Policy, d policy.Decision, ev *audit.Event, how arrival) bool {
	ok, full := s.limiter.startBrokered()
	if ok {
		return true
	}
	refused := policy.Decision{Reason: policy.LimitExceeded, Host: d.Host, Port: d.Port}
	sentence := policy.BrokeredCapSentence(d.Host, full, p)
	ev.Msg = fmt.Sprintf("limits.max_brokered_connections %d reached", full)
	s.refuseSaying(client, refused, ev, how, sentence)
	return false
}

// refusedAfterConnect records a connection refused after its CONNECT was
// answered: the client asked for a host and then did not speak TLS to it,
// or went away. The caller has closed both sides.
func (s *Server) refusedAfterConnect(ev *audit.Event, reason policy.Reason, msg string) {
	ev.Decision, ev.Reason, ev.Msg = "deny", string(reason), msg
	s.recordDenial(*ev)
}

// refusedAfterAllow records a tunnel refused after its allow line was
// written (a second ClientHello after a HelloRetryRequest). It is never
// folded: the line pairs with the allow line by conn id, so a report counts
// the tunnel as refused and not as reached, and each costs one line at
// most beside the allow and close lines the tunnel writes anyway.
func (s *Server) refusedAfterAllow(ev *audit.Event, reason policy.Reason, msg string) {
	ev.Decision, ev.Reason, ev.Msg = "deny", string(reason), msg
	s.metrics.Decisions.WithLabelValues(ev.Integration, ev.Decision, ev.Reason).Inc()
	s.opts.Audit.Write(*ev)
}

// baseEvent starts an event with the integration's identity: the id in
// force (policy.Policy.InForce: the old id while an id change waits, with
// the change in pending), the id a manifest claims marked as a claim while
// the claim waits (policy.Policy.Identify).
func (s *Server) baseEvent(p *policy.Policy) audit.Event {
	ev := s.identity(p, audit.Event{Kind: audit.Connect})
	if p != nil {
		ev.Generation = p.Generation
		ev.Pending = p.PendingChange()
	}
	return ev
}

// record writes an allow or would_deny connect event.
func (s *Server) record(p *policy.Policy, ev audit.Event) error {
	s.metrics.Decisions.WithLabelValues(ev.Integration, ev.Decision, ev.Reason).Inc()
	err := s.opts.Audit.Write(ev)
	s.metrics.AuditHealthy.Set(boolFloat(s.opts.Audit.Healthy()))
	return err
}

// recordDenial writes a deny event, folding repeats of the same refusal.
func (s *Server) recordDenial(ev audit.Event) {
	s.metrics.Decisions.WithLabelValues(ev.Integration, ev.Decision, ev.Reason).Inc()
	if s.opts.Suppress == nil {
		s.opts.Audit.Write(ev)
		return
	}
	// The suppressor folds refusals alike in every field a reviewer groups
	// by, generation included, and keeps every distinct finding.
	s.opts.Suppress.Write(ev)
}

// recordClose writes a tunnel's close line. hello is, for a tunnel refused
// after its allow line, the size of the ClientHello that allow covered, so
// a report can tell bytes that reached the origin past it (early data) from
// a refusal that delivered nothing else; 0 otherwise.
func (s *Server) recordClose(p *policy.Policy, t *tunnel, connect audit.Event, up, down, hello int64) {
	ev := s.baseEvent(p)
	ev.Kind, ev.Conn, ev.Host, ev.Port, ev.Addr = audit.Close, t.conn, connect.Host, connect.Port, connect.Addr
	ev.Decision, ev.Exemption = connect.Decision, connect.Exemption
	ev.BytesUp, ev.BytesDown, ev.DurationMS = up, down, time.Since(t.started).Milliseconds()
	ev.HelloBytes = hello
	if r := t.closeReason(); r != "" {
		ev.Reason = string(r)
	}
	s.metrics.Bytes.WithLabelValues(ev.Integration, "up").Add(float64(up))
	s.metrics.Bytes.WithLabelValues(ev.Integration, "down").Add(float64(down))
	s.opts.Audit.Write(ev)
}

// methodResponse is the 405 for anything but CONNECT: egressd carries https
// only, and never forwards a plain request.
func (s *Server) methodResponse(r *http.Request) *http.Response {
	p := s.opts.Registry.Policy(s.opts.Key)
	ev := s.baseEvent(p)
	ev.Conn, ev.Method = s.nextConnID(), audit.Cap(r.Method, 16)
	nameRefusedRequest(&ev, r)
	ev.Decision, ev.Reason = "deny", string(policy.MethodNotAllowed)
	s.recordDenial(ev)
	body := policy.Sentence(policy.Decision{Reason: policy.MethodNotAllowed}, p) + "\n"
	h := http.Header{}
	h.Set(ReasonHeader, string(policy.MethodNotAllowed))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Connection", "close")
	h.Set("Allow", "CONNECT")
	return &http.Response{
		StatusCode: http.StatusMethodNotAllowed, ProtoMajor: 1, ProtoMinor: 1, Header: h, Close: true,
		ContentLength: int64(len(body)), Body: bodyOf(body), Request: r,
	}
}

// nameRefusedRequest puts on ev where r tried to go. An absolute-form
// target ("GET http://host/") names it; an origin-form one ("GET /",
// "OPTIONS *") names it only in Host:, so the record's host_raw is the
// Host as sent (escaped and capped by the writer) and the target is its
// path (never the query): "/" alone hid the metadata address or C2 name
// the request tried, and folded every such attempt into one line.
func nameRefusedRequest(ev *audit.Event, r *http.Request) {
	ev.HostRaw = r.RequestURI
	if originForm := strings.HasPrefix(r.RequestURI, "/") || r.RequestURI == "*"; originForm && r.Host != "" {
		ev.HostRaw, ev.Path = r.Host, r.URL.Path
	}
}

// refuseMethod serves the 405 on goproxy's NonproxyHandler path
// (origin-form requests such as "GET /" and "OPTIONS *").
func (s *Server) refuseMethod(w http.ResponseWriter, r *http.Request) {
	resp := s.methodResponse(r)
	defer resp.Body.Close()
	s.writeResponse(w, resp)
}

// writeResponse copies resp to w.
func (s *Server) writeResponse(w http.ResponseWriter, resp *http.Response) {
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func bodyOf(s string) io.ReadCloser { return io.NopCloser(strings.NewReader(s)) }

func integrationName(p *policy.Policy) string {
	if p == nil {
		return ""
	}
	id, _ := p.InForce()
	return id
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
