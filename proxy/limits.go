package proxy

import (
	"sync/atomic"

	"github.com/egressd/egressd/policy"
	"golang.org/x/time/rate"
)

// limiter holds one integration's connection limits: a token bucket for new
// requests, a cap on connections between accept and splice (handshake
// slots, taken at accept so that connections that never send a request are
// counted too), a cap on open tunnels, and a lower one on those of them
// egressd terminates TLS on to add a secret (brokered: two TLS stacks and
// HTTP/2 windows each, where a spliced tunnel holds a few KiB). A reload
// changes the limits in place; the counts carry over.
type limiter struct {
	rate          *rate.Limiter
	requests      *rate.Limiter // requests on brokered connections
	handshakes    atomic.Int64
	maxHandshakes atomic.Int64
	tunnels       atomic.Int64
	maxTunnels    atomic.Int64
	brokered      atomic.Int64
	maxBrokered   atomic.Int64
}

func newLimiter(l policy.Limits) *limiter {
	lim := &limiter{
		rate:     rate.NewLimiter(rate.Limit(l.ConnectionsPerSecond), l.Burst),
		requests: rate.NewLimiter(rate.Limit(l.RequestsPerSecond), l.RequestBurst),
	}
	lim.apply(l)
	return lim
}

// apply sets new limits. Connections already over a lowered cap stay; new
// ones wait for the count to fall below it.
func (l *limiter) apply(lim policy.Limits) {
	l.rate.SetLimit(rate.Limit(lim.ConnectionsPerSecond))
	l.rate.SetBurst(lim.Burst)
	l.requests.SetLimit(rate.Limit(lim.RequestsPerSecond))
	l.requests.SetBurst(lim.RequestBurst)
	l.maxHandshakes.Store(int64(lim.MaxHandshakes))
	l.maxTunnels.Store(int64(lim.MaxTunnels))
	l.maxBrokered.Store(int64(lim.MaxBrokeredConnections))
}

// takeSlot takes a handshake slot for a connection just accepted, or
// reports false when every slot is taken. A true result must be paired
// with endHandshake.
func (l *limiter) takeSlot() bool {
	if l.handshakes.Add(1) > l.maxHandshakes.Load() {
		l.handshakes.Add(-1)
		return false
	}
	return true
}

func (l *limiter) endHandshake() { l.handshakes.Add(-1) }

// allowRequest spends a token for a request read on a connection.
func (l *limiter) allowRequest() bool { return l.rate.Allow() }

// allowBrokered spends a token for a request on a brokered connection.
func (l *limiter) allowBrokered() bool { return l.requests.Allow() }

// startTunnel admits a tunnel under the concurrent cap.
func (l *limiter) startTunnel() bool {
	if l.tunnels.Add(1) > l.maxTunnels.Load() {
		l.tunnels.Add(-1)
		return false
	}
	return true
}

func (l *limiter) endTunnel() { l.tunnels.Add(-1) }

// startBrokered admits a brokered connection under its own cap, or
// reports false with the cap it found full (limits.max_brokered_connections,
// for the refusal to name). A cap of 0 admits none. A true result must be
// paired with endBrokered.
func (l *limiter) startBrokered() (ok bool, max int64) {
	max = l.maxBrokered.Load()
	if l.brokered.Add(1) > max {
		l.brokered.Add(-1)
		return false, max
	}
	return true, max
}

func (l *limiter) endBrokered() { l.brokered.Add(-1) }

// Gate is the global cap on connections across every listener, kept below
// RLIMIT_NOFILE so egressd never runs out of descriptors while holding a
// half-made tunnel, and so the admin endpoint keeps descriptors of its own.
// It is checked at accept: a connection past it is closed at once.
type Gate struct {
	open atomic.Int64
	max  atomic.Int64
}

// NewGate allows max connections at once; each tunnel holds two fds.
func NewGate(max int) *Gate {
	g := &Gate{}
	g.max.Store(int64(max))
	return g
}

// SetMax changes the cap (a reload of limits.max_connections).
func (g *Gate) SetMax(max int) {
	if g != nil {
		g.max.Store(int64(max))
	}
}

// Max returns the cap, 0 for a nil Gate (no cap).
func (g *Gate) Max() int64 {
	if g == nil {
		return 0
	}
	return g.max.Load()
}

func (g *Gate) enter() {
	if g != nil {
		g.open.Add(1)
	}
}

func (g *Gate) leave() {
	if g != nil {
		g.open.Add(-1)
	}
}

// full reports whether the cap is reached.
func (g *Gate) full() bool { return g != nil && g.open.Load() >= g.max.Load() }

// Open returns the connections now counted.
func (g *Gate) Open() int64 { return g.open.Load() }
