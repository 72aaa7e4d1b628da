package proxy

import "github.com/egressd/egressd/policy"

// settings are the operator's limits, timeouts and audit-failure choice a
// Server applies. A reload replaces them (Apply), so every reader takes
// them from s.settings() at the moment it needs them.
type settings struct {
	limits    policy.Limits
	timeouts  policy.Timeouts
	onFailure policy.OnFailure
}

func (s *Server) settings() *settings { return s.current.Load() }

// Apply puts a reloaded config's limits, timeouts and audit.on_failure in
// force. Connections in progress keep the deadlines they were given; every
// later wait and count uses the new values.
func (s *Server) Apply(l policy.Limits, t policy.Timeouts, onFailure policy.OnFailure) {
	s.current.Store(&settings{limits: l, timeouts: t, onFailure: onFailure})
	s.limiter.apply(l)
}
