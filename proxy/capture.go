package proxy

import (
	"bufio"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
)

// ServeCaptured serves a sandbox's transparent capture listener: a program
// that ignores HTTPS_PROXY connects to a synthetic address from the sandbox
// DNS, and lands here. The address maps back to the name, and the
// connection gets the same checks as an explicit CONNECT, ClientHello
// included. A connection to any other address is refused: the sandbox
// never handed it out, so the program wrote it in.
func (s *Server) ServeCaptured(ln net.Listener, names *Synthetic) error {
	s.sweepOnce.Do(func() { go s.sweepLoop() })
	s.trackListener(ln)
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) { // EMFILE and friends
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		if !s.admit(c, false) {
			continue
		}
		if !s.startHandler() {
			s.releaseSlot(c)
			c.Close()
			return nil
		}
		s.opts.Gate.enter()
		go func() {
			defer s.handlers.Done()
			defer s.opts.Gate.leave()
			defer s.releaseSlot(c)
			s.captured(c, names)
		}()
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (s *Server) captured(c net.Conn, names *Synthetic) {
	local, err := netip.ParseAddrPort(c.LocalAddr().String())
	name, ok := names.Lookup(local.Addr())
	if err != nil || !ok {
		p := s.opts.Registry.Policy(s.opts.Key)
		ev := s.baseEvent(p)
		ev.Kind, ev.Conn, ev.Method, ev.HostRaw = audit.Connect, s.nextConnID(), "captured", local.String()
		ev.Decision, ev.Reason = "deny", string(policy.IPLiteral)
		ev.Msg = "connection to an address the sandbox DNS never handed out"
		s.recordDenial(ev)
		c.Close()
		return
	}
	s.serveTarget(c, bufio.NewReader(c), name.String()+":"+strconv.Itoa(int(local.Port())), captured)
}
