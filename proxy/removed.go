package proxy

import (
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// A reload that removes an integration closes its listener and drains the
// connections it had accepted. Those connections were accepted for that
// integration, and stay its: what they ask for afterwards is logged under
// its id (the policy the listener last served, kept from accept) and
// refused integration_removed, never as an anonymous bad_request.

// accepted remembers the policy in force when the listener accepted a
// connection, for the records of connections that outlive it.
func (s *Server) accepted() {
	if p := s.opts.Registry.Policy(s.opts.Key); p != nil {
		s.served.Store(p)
	}
}

// removed reports whether the listener's integration has been removed.
func (s *Server) removed() bool { return s.opts.Registry.Policy(s.opts.Key) == nil }

// removedSentence is the 403 body of a request after the removal (policy.Sentence says the same).
var removedSentence = policy.Sentence(policy.Decision{Reason: policy.IntegrationRemoved}, nil)

// Close answers a request net/http dropped unanswered. Once its listener
// is shutting down (the integration removed), net/http closes a
// connection whose request head arrives without running a handler or
// writing a byte; the client would see only a close, and the log an
// anonymous "closed before a complete request". A connection that sent a
// request line is answered 403 integration_removed and audited first.
func (g *headGuard) Close() error {
	if !g.handed.Load() && g.line.complete() && g.s.removed() && g.answered.CompareAndSwap(false, true) {
		g.s.requestArrived(g) // audited here, not again when net/http reports the close
		g.s.refusedRemoved(g.line.target())
		g.Conn.Write(refusal(policy.IntegrationRemoved, removedSentence))
	}
	return g.Conn.Close()
}

// refusedRemoved records a request refused because the listener's
// integration was removed before it was served.
func (s *Server) refusedRemoved(t requestTarget) {
	ev := s.baseEvent(nil)
	ev.Decision, ev.Reason = "deny", string(policy.IntegrationRemoved)
	ev.Msg = "the integration this connection was accepted for was removed from the config before its request was served"
	t.name(&ev)
	s.recordDenial(ev)
}

// identity is the integration a record of this listener belongs to: the
// policy in force, or once it is removed the one it last served.
func (s *Server) identity(p *policy.Policy, ev audit.Event) audit.Event {
	if p == nil {
		p = s.served.Load()
	}
	return p.Identify(ev)
}
