package proxy

import (
	"net/netip"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// RefuseDirect audits a connection a sandboxed program tried to make
// straight to an address, around the proxy: a TCP connect or a UDP
// datagram (anything but the sandbox DNS) that the sandbox's routes handed
// to the supervisor instead of the network. Nothing of it left the
// sandbox; the refusal is folded like any other, by destination port, and
// counts against the integration's connection rate.
func (s *Server) RefuseDirect(proto string, dst netip.AddrPort) {
	p := s.opts.Registry.Policy(s.opts.Key)
	ev := s.baseEvent(p)
	ev.Kind, ev.Conn, ev.Method = audit.Connect, s.nextConnID(), proto
	ev.HostRaw, ev.Addr, ev.Port = dst.String(), dst.String(), dst.Port()
	ev.Decision, ev.Reason = "deny", string(policy.IPLiteral)
	ev.Msg = "direct " + proto + " to an address, around the proxy; nothing left the sandbox"
	// A port scan would write a line per port: attempts share the
	// integration's token bucket, and past it fold into one line a second.
	if !s.limiter.rate.Allow() {
		ev.Reason, ev.Port = string(policy.LimitExceeded), 0
	}
	s.recordDenial(ev)
}

// RefuseDirectUnseen audits direct attempts the sandbox's queue to the
// supervisor dropped before they were read (a burst past its length):
// refused like the rest, nothing of them left the sandbox, but their
// destinations were never seen. dropped is the sandbox's running total;
// each call writes one line standing for the drops since the last, so the
// log accounts for every attempt, while the program runs and at its exit.
func (s *Server) RefuseDirectUnseen(dropped uint64) {
	for {
		prev := s.unseenDirect.Load()
		if dropped <= prev {
			return
		}
		if s.unseenDirect.CompareAndSwap(prev, dropped) {
			s.writeUnseen(dropped - prev)
			return
		}
	}
}

func (s *Server) writeUnseen(n uint64) {
	p := s.opts.Registry.Policy(s.opts.Key)
	ev := s.baseEvent(p)
	ev.Kind, ev.Decision, ev.Reason = audit.Connect, "deny", string(policy.IPLiteral)
	ev.Suppressed, ev.Unlisted = int64(n), int64(n)
	ev.Msg = "direct attempts around the proxy that egress0's queue dropped before egressd read them: refused, destinations not seen; nothing left the sandbox"
	s.metrics.Decisions.WithLabelValues(ev.Integration, ev.Decision, ev.Reason).Add(float64(n))
	s.opts.Audit.Write(ev)
}
