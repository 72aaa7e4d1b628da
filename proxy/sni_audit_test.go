package proxy

import "testing"

// TestDomainFrontedTunnelRecordsTheSNIItSent: a reviewer must see where the
// client really tried to go, not only that it differed.
func TestDomainFrontedTunnelRecordsTheSNIItSent(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	target := "api.allowed.example:" + itoa(e.origin.Addr.Port())
	if status, closed := e.rawTunnel(target, buildHello(helloSpec{names: []string{"fronted.evil.example"}})); status != 200 || !closed {
		t.Fatalf("status %d, closed %v", status, closed)
	}
	e.log.waitEvent(t, map[string]any{"event": "connect", "decision": "deny", "reason": "sni_mismatch", "host": "api.allowed.example", "sni": "fronted.evil.example"})
}
