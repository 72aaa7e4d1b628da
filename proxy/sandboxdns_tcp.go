package proxy

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"github.com/miekg/dns"
)

// The sandbox's DNS over TCP is served by the supervisor, so what one
// sandbox can make it hold is bounded here: at most MaxSandboxDNSConns
// connections at once (the rest are closed at accept and audited, folded),
// each message at most MaxDNSQueryBytes (miekg/dns's own reader allocates
// whatever 16-bit length the client declares, 64 KB per connection, before
// a byte of it arrives), the first message read whole within
// dnsTCPReadTimeout of the accept and each later one within
// dnsTCPIdleTimeout of the previous answer (one deadline covers the whole
// message, so a trickle does not extend it). The supervisor's DNS buffers
// are so at most MaxSandboxDNSConns × MaxDNSQueryBytes (256 KB), and its
// DNS descriptors at most MaxSandboxDNSConns.
const (
	MaxSandboxDNSConns = 64
	// MaxDNSQueryBytes is well above any query: a question is at most
	// 12+255+4 bytes, and EDNS options a stub sends (a cookie, padding to
	// 468 bytes) stay far below it.
	MaxDNSQueryBytes  = 4096
	dnsTCPReadTimeout = 2 * time.Second
	dnsTCPIdleTimeout = 8 * time.Second
)

// errDNSMessageTooLarge ends a connection that declares a message over
// MaxDNSQueryBytes; nothing of the message is read.
var errDNSMessageTooLarge = errors.New("DNS message over " + strconv.Itoa(MaxDNSQueryBytes) + " bytes")

// TCPServer returns the server for the sandbox's DNS-over-TCP listener,
// with the bounds above; the handler is d, as for UDP.
func (d *SandboxDNS) TCPServer(ln net.Listener) *dns.Server {
	capped := &dnsTCPListener{Listener: ln, d: d}
	return &dns.Server{
		Listener: capped, Handler: d,
		MsgAcceptFunc: acceptEveryMessage, MsgInvalidFunc: d.malformed,
		ReadTimeout: dnsTCPReadTimeout,
		IdleTimeout: func() time.Duration { return dnsTCPIdleTimeout },
		DecorateReader: func(inner dns.Reader) dns.Reader {
			return boundedDNSReader{Reader: inner, d: d}
		},
	}
}

// dnsTCPListener admits at most MaxSandboxDNSConns connections at once.
type dnsTCPListener struct {
	net.Listener
	d      *SandboxDNS
	open   atomic.Int64
	closed atomic.Bool // Close was called: the server is shutting down
}

func (l *dnsTCPListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > MaxSandboxDNSConns {
			l.open.Add(-1)
			c.Close()
			l.d.refusedAtAccept()
			continue
		}
		return &dnsTCPConn{Conn: c, l: l}, nil
	}
}

func (l *dnsTCPListener) Close() error {
	l.closed.Store(true)
	return l.Listener.Close()
}

// dnsTCPConn gives its place back when it closes, once.
type dnsTCPConn struct {
	net.Conn
	l    *dnsTCPListener
	once sync.Once
}

func (c *dnsTCPConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}

// boundedDNSReader reads a TCP message as miekg/dns's reader does, except
// that it refuses a declared length over MaxDNSQueryBytes before
// allocating anything.
type boundedDNSReader struct {
	dns.Reader // UDP: not used by TCPServer
	d          *SandboxDNS
}

func (r boundedDNSReader) ReadTCP(conn net.Conn, timeout time.Duration) ([]byte, error) {
	conn.SetReadDeadline(time.Now().Add(timeout))
	// miekg/dns's Shutdown unblocks reads with a deadline in the past, after
	// closing the listener; a deadline set here after that must not undo it.
	if c, ok := conn.(*dnsTCPConn); ok && c.l.closed.Load() {
		conn.SetReadDeadline(time.Unix(1, 0))
	}
	var prefix [2]byte
	if _, err := io.ReadFull(conn, prefix[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint16(prefix[:])
	if n > MaxDNSQueryBytes {
		r.d.refusedMessage()
		return nil, errDNSMessageTooLarge
	}
	m := make([]byte, n)
	if _, err := io.ReadFull(conn, m); err != nil {
		return nil, err
	}
	return m, nil
}

// refusedAtAccept audits a DNS connection closed at accept; repeats fold.
func (d *SandboxDNS) refusedAtAccept() {
	d.refused("DNS connection closed at accept: the sandbox's DNS-over-TCP connections are at " + strconv.Itoa(MaxSandboxDNSConns))
}

// refusedMessage audits a connection closed for the size it declared. The
// size is not in the sentence, so a flood of sizes folds into one line.
func (d *SandboxDNS) refusedMessage() {
	d.refused("DNS connection closed: it declared a message over " + strconv.Itoa(MaxDNSQueryBytes) + " bytes")
}

func (d *SandboxDNS) refused(msg string) {
	s := d.Server
	p := s.opts.Registry.Policy(s.opts.Key)
	ev := s.baseEvent(p)
	ev.Kind, ev.Decision, ev.Reason, ev.Msg = audit.DNS, "deny", string(policy.LimitExceeded), msg
	s.recordDenial(ev)
}
