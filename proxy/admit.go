package proxy

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/policy"
)

// An integration's share of egressd is bounded from accept, before its
// connection sends a byte: each accepted connection takes one of the
// listener's handshake slots (limits.max_handshakes) and one place under
// the global Gate, and holds them until its tunnel starts or it closes. A
// connection that would exceed either is closed at once and audited
// (folded), so an idle flood against one listener costs that listener its
// own slots and nothing else: other integrations' CONNECTs, and the admin
// endpoint's descriptors, are untouched. A connection that does not send
// its request within timeouts.request_header is closed.

// pending is an accepted connection's claim on a handshake slot.
type pending struct {
	once    sync.Once
	timer   *time.Timer
	arrived atomic.Bool // the request head was read
	s       *Server
}

// release gives the slot back; only the first call counts.
func (p *pending) release() {
	p.once.Do(func() {
		if p.timer != nil {
			p.timer.Stop()
		}
		p.s.limiter.endHandshake()
	})
}

// admitListener takes a slot for every connection it accepts.
type admitListener struct {
	net.Listener
	s *Server
}

func (l admitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		g := &headGuard{Conn: c, s: l.s}
		if l.s.admit(g, true) {
			return g, nil
		}
	}
}

// admit takes a handshake slot for c, or closes c and audits the refusal.
// With headerTimeout, c is closed if it is still waiting for its request
// when timeouts.request_header runs out.
func (s *Server) admit(c net.Conn, headerTimeout bool) bool {
	why := ""
	switch {
	case s.opts.Gate.full():
		why = "egressd's global connection cap (limits.max_connections) is reached"
	case !s.limiter.takeSlot():
		why = "this listener's connections waiting for a request or a handshake are at limits.max_handshakes"
	}
	if why != "" {
		c.Close()
		s.refusedAtAccept(why)
		return false
	}
	p := &pending{s: s}
	if headerTimeout {
		p.timer = time.AfterFunc(s.settings().timeouts.RequestHeader, func() {
			if !p.arrived.Load() {
				c.Close() // net/http sees the close; connState audits it
			}
		})
	}
	s.slots.Store(slotKey(c), p)
	s.accepted()
	return true
}

// requestArrived stops c's request-header clock; its slot stays taken
// until the handshake ends.
func (s *Server) requestArrived(c any) {
	if v, ok := s.slots.Load(slotKey(c)); ok {
		p := v.(*pending)
		p.arrived.Store(true)
		if p.timer != nil {
			p.timer.Stop()
		}
	}
}

// releaseSlot frees c's handshake slot, if it holds one, and reports
// whether c closed before its request was read.
func (s *Server) releaseSlot(c any) (beforeRequest bool) {
	v, ok := s.slots.LoadAndDelete(slotKey(c))
	if !ok {
		return false
	}
	p := v.(*pending)
	p.release()
	return !p.arrived.Load()
}

// slotKey is the connection a slot is filed under: the accepted socket,
// whether the caller holds it in its head guard (net/http's callbacks) or
// unguarded (the CONNECT path, which splices the socket itself).
func slotKey(c any) any {
	if g, ok := c.(*headGuard); ok {
		return g.Conn
	}
	return c
}

// refusedAtAccept records a connection closed at accept. Repeats fold into
// one line per second with a count, so a flood cannot flood the log.
func (s *Server) refusedAtAccept(why string) {
	p := s.opts.Registry.Policy(s.opts.Key)
	s.metrics.PreHandler.WithLabelValues(integrationName(p)).Inc()
	ev := s.baseEvent(p)
	ev.Decision, ev.Reason = "deny", string(policy.LimitExceeded)
	ev.Msg = "connection closed at accept: " + why
	s.recordDenial(ev)
}
