package proxy

import (
	"testing"
	"time"
)

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

// TestFrontingWithAServerNameThatIsNoHostNameRecordsItRaw is issue 18's
// third attacker, finding 2: a ClientHello whose server_name does not parse
// as a host name (an underscore, an IP, a trailing dot, a NUL) was refused
// as sni_mismatch with no trace of what it asked for, and distinct fronting
// targets folded as repeats of the CONNECT host. Each is recorded as sent,
// escaped, in sni_raw, and keeps a line of its own.
func TestFrontingWithAServerNameThatIsNoHostNameRecordsItRaw(t *testing.T) {
	e := newEnv(t, withFoldWindow(time.Hour))
	e.resolveToOrigin("api.allowed.example")
	target := "api.allowed.example:" + itoa(e.origin.Addr.Port())
	sent := map[string]string{
		"evil_front.other-cdn.example":          "evil_front.other-cdn.example",
		"169.254.169.254":                       "169.254.169.254",
		"api.allowed.example.":                  "api.allowed.example.",
		"api.allowed.example\x00.evil.example":  `api.allowed.example\x00.evil.example`,
		"secret_data_here.exfil.example\x1b[2J": `secret_data_here.exfil.example\x1b[2J`,
	}
	for sni := range sent {
		if status, closed := e.rawTunnel(target, buildHello(helloSpec{names: []string{sni}})); status != 200 || !closed {
			t.Fatalf("%q: status %d, closed %v", sni, status, closed)
		}
	}
	for _, logged := range sent {
		e.log.waitEvent(t, map[string]any{"event": "connect", "reason": "sni_mismatch", "host": "api.allowed.example", "sni_raw": logged})
	}
}
