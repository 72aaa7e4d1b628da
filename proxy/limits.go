package proxy

import (
	"sync/atomic"

	"github.com/egressd/egressd/policy"
	"golang.org/x/time/rate"
)

// limiter holds one integration's connection limits: a token bucket for new
// connections, and caps on CONNECTs in progress and on open tunnels.
type limiter struct {
	rate          *rate.Limiter
	handshakes    atomic.Int64
	maxHandshakes int64
	tunnels       atomic.Int64
	maxTunnels    int64
}

func newLimiter(l policy.Limits) *limiter {
	return &limiter{
		rate:          rate.NewLimiter(rate.Limit(l.ConnectionsPerSecond), l.Burst),
		maxHandshakes: int64(l.MaxHandshakes),
		maxTunnels:    int64(l.MaxTunnels),
	}
}

// startHandshake admits a new CONNECT, or reports false when the bucket is
// empty or too many are in progress. A true result must be paired with
// endHandshake.
func (l *limiter) startHandshake() bool {
	if !l.rate.Allow() {
		return false
	}
	if l.handshakes.Add(1) > l.maxHandshakes {
		l.handshakes.Add(-1)
		return false
	}
	return true
}

func (l *limiter) endHandshake() { l.handshakes.Add(-1) }

// startTunnel admits a tunnel under the concurrent cap.
func (l *limiter) startTunnel() bool {
	if l.tunnels.Add(1) > l.maxTunnels {
		l.tunnels.Add(-1)
		return false
	}
	return true
}

func (l *limiter) endTunnel() { l.tunnels.Add(-1) }

// Gate is the global cap on connections across every listener, kept below
// RLIMIT_NOFILE so egressd never runs out of descriptors while holding a
// half-made tunnel. Accept itself backs off on EMFILE (net/http retries
// temporary accept errors with exponential delay).
type Gate struct {
	open atomic.Int64
	max  int64
}

// NewGate allows max connections at once; each tunnel holds two fds.
func NewGate(max int) *Gate { return &Gate{max: int64(max)} }

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

// full reports whether more connections are open than allowed.
func (g *Gate) full() bool { return g != nil && g.open.Load() > g.max }

// Open returns the connections now counted.
func (g *Gate) Open() int64 { return g.open.Load() }
