package proxy

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
)

// tunnel is one spliced connection pair. Both sides stay raw (*net.TCPConn
// upstream, *net.TCPConn or *net.UnixConn client) so io.Copy uses splice(2);
// nothing wraps them, and bytes are counted from io.Copy's results.
type tunnel struct {
	conn     string
	client   net.Conn
	upstream *net.TCPConn
	host     allowlist.Name
	port     uint16
	addr     netip.AddrPort
	started  time.Time
	secrets  string // secretsPrint of the secrets bound to host when it opened
	// allSecrets is, for a brokered tunnel, secretsPrint of every secret in
	// force when it opened: its responses' scrub patterns are fixed at
	// each answer's head, so a rotated or added value is let through by
	// a stream begun before the reload (round 23). Any change closes it.
	allSecrets string
	closing    closing // what its close record needs of the connect event (spliced tunnels)

	// Watched by the sweeper only.
	lastSent, lastRecv uint64
	lastActive         time.Time

	reason    atomic.Value // policy.Reason set by whoever closes it early
	closeOnce sync.Once
}

// halfCloser is the part of *net.TCPConn and *net.UnixConn used to pass a
// half-close on.
type halfCloser interface{ CloseWrite() error }

// run replays what was read from the client and not yet forwarded (the
// handshake guard forwards the ClientHello and what it checked), then
// splices both ways until both sides are done. up counts client→origin
// bytes, down origin→client.
func (t *tunnel) run(replay []byte) (up, down int64) {
	var s splicers
	done := endedOn(make(chan [2]int64, 1))
	t.start(replay, &s, done)
	moved := <-done
	return moved[0], moved[1]
}

// endedOn is a tunnelEnder that sends the byte counts.
type endedOn chan [2]int64

func (c endedOn) tunnelEnded(up, down int64) { c <- [2]int64{up, down} }

// tunnelEnder is told, once, that both directions of a tunnel are done.
type tunnelEnder interface{ tunnelEnded(up, down int64) }

// start is run without the wait: it replays, starts each direction on a
// goroutine of its own, keeping their state in s (zero, and the caller's
// to place), and returns. The direction that ends last closes both sides
// and tells end the byte counts. A fresh goroutine parked in splice holds
// a stack of the smallest size the runtime gives
// (BenchmarkIdleTunnelMemory).
func (t *tunnel) start(replay []byte, s *splicers, end tunnelEnder) {
	var replayed int64
	if len(replay) > 0 { // usually empty: Go would still make the write(2)
		n, err := t.upstream.Write(replay)
		replayed = int64(n)
		if err != nil {
			t.abort()
			end.tunnelEnded(replayed, 0)
			return
		}
	}
	s.t, s.end = t, end
	s.up.Store(replayed)
	s.left.Store(2)
	go s.pumpUp()
	go s.pumpDown()
}

// splicers are a tunnel's two directions; the one that ends last ends
// the tunnel.
type splicers struct {
	t        *tunnel
	end      tunnelEnder
	up, down atomic.Int64
	left     atomic.Int32
}

func (s *splicers) pumpUp() {
	n, err := pump(s.t.upstream, s.t.client)
	s.t.finishDirection(s.t.upstream, err)
	s.up.Add(n)
	s.directionDone()
}

func (s *splicers) pumpDown() {
	n, err := pump(s.t.client, s.t.upstream)
	s.t.finishDirection(s.t.client, err)
	s.down.Add(n)
	s.directionDone()
}

func (s *splicers) directionDone() {
	if s.left.Add(-1) == 0 {
		s.t.abort()
		s.end.tunnelEnded(s.up.Load(), s.down.Load())
	}
}

// finishDirection passes a clean EOF on as a half-close, and tears the whole
// tunnel down on an error (a reset, or a close by the sweeper).
func (t *tunnel) finishDirection(dst net.Conn, err error) {
	if err != nil {
		t.abort()
		return
	}
	if hc, ok := dst.(halfCloser); ok {
		hc.CloseWrite()
	}
}

// watched is the connection every byte of the tunnel crosses: the
// upstream one when spliced; when brokered, the client's, since the broker
// may have replaced the first upstream connection with others.
func (t *tunnel) watched() *net.TCPConn {
	if c, ok := t.client.(*net.TCPConn); ok && t.secrets != "" {
		return c
	}
	return t.upstream
}

// closeWith closes the tunnel early and records why.
func (t *tunnel) closeWith(r policy.Reason) {
	t.reason.CompareAndSwap(nil, r)
	t.abort()
}

func (t *tunnel) abort() {
	t.closeOnce.Do(func() {
		t.client.Close()
		t.upstream.Close()
	})
}

// closeReason is why the tunnel was closed early, or "".
func (t *tunnel) closeReason() policy.Reason {
	r, _ := t.reason.Load().(policy.Reason)
	return r
}

// tunnels is the set of open tunnels of one listener.
type tunnels struct {
	mu sync.Mutex
	m  map[*tunnel]struct{}
}

func (ts *tunnels) add(t *tunnel) {
	ts.mu.Lock()
	if ts.m == nil {
		ts.m = map[*tunnel]struct{}{}
	}
	ts.m[t] = struct{}{}
	ts.mu.Unlock()
}

func (ts *tunnels) remove(t *tunnel) {
	ts.mu.Lock()
	delete(ts.m, t)
	ts.mu.Unlock()
}

func (ts *tunnels) len() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.m)
}

// each calls fn for a snapshot of the open tunnels, outside the lock.
func (ts *tunnels) each(fn func(*tunnel)) {
	ts.mu.Lock()
	list := make([]*tunnel, 0, len(ts.m))
	for t := range ts.m {
		list = append(list, t)
	}
	ts.mu.Unlock()
	for _, t := range list {
		fn(t)
	}
}

// sweep closes tunnels idle for longer than idle (judged from the kernel's
// TCP_INFO counters of the upstream side, which every byte crosses) or open
// for longer than lifetime (0: no limit).
func (ts *tunnels) sweep(now time.Time, idle, lifetime time.Duration) {
	ts.each(func(t *tunnel) {
		if lifetime > 0 && now.Sub(t.started) > lifetime {
			t.closeWith(policy.Timeout)
			return
		}
		sent, recv, ok := trafficCounters(t.watched())
		if !ok {
			return
		}
		if sent != t.lastSent || recv != t.lastRecv || t.lastActive.IsZero() {
			t.lastSent, t.lastRecv, t.lastActive = sent, recv, now
			return
		}
		if idle > 0 && now.Sub(t.lastActive) > idle {
			t.closeWith(policy.Timeout)
		}
	})
}
