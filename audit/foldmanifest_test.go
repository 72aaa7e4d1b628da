package audit

import (
	"testing"
	"time"
)

// TestRefusalsOfTwoUnloadedManifestsNeverFoldTogether: a listener whose
// manifest never loaded has no integration, claim, listener or generation
// to fold by, only its manifest path; every such listener fell into one
// fold class, and the summary kept the first event's manifest, so 19 of a
// hostile integration's 20 refused attempts were logged under the victim's
// manifest (round 11 attacker, issue 18). The manifest is egressd's (the
// configured path), never the client's, so it belongs in the class.
func TestRefusalsOfTwoUnloadedManifestsNeverFoldTogether(t *testing.T) {
	f := newFoldLog(t)
	refused := func(manifest, host string) Event {
		return Event{Kind: Connect, Manifest: manifest, Decision: "deny", Reason: "manifest_not_loaded", Method: "CONNECT", Host: host, Port: 443}
	}
	f.s.Write(refused("/srv/victim", "api.victim.example"))
	for range 20 {
		f.clock = f.clock.Add(time.Millisecond)
		f.s.Write(refused("/srv/hostile", "exfil.evil.example"))
	}
	var victim, hostile int64
	for _, l := range f.lines(t) {
		n := int64(1)
		if s, ok := l["suppressed"].(float64); ok {
			n = int64(s)
		}
		switch l["manifest"] {
		case "/srv/victim":
			victim += n
		case "/srv/hostile":
			hostile += n
		default:
			t.Fatalf("a line names no manifest: %v", l)
		}
	}
	if victim != 1 || hostile != 20 {
		t.Fatalf("victim's manifest stands for %d attempts, hostile's for %d; want 1 and 20:\n%s", victim, hostile, f.buf.String())
	}
}
