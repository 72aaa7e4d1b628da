package policy

import (
	"testing"

	"github.com/egressd/egressd/audit"
)

// TestEventsWhileAWideningWaitsNameTheVersionInForce: round 39. While
// 1.1.0's widening waited, every event carried integration_version 1.1.0
// although 1.0.0's list decided it, so a reader of the log took the
// unapproved version for the one in force.
func TestEventsWhileAWideningWaitsNameTheVersionInForce(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	f.write("com.acme.erp", "1.1.0", "erp.acme.example", "evil.example")
	r := f.registry()
	f.load(r, Pending)
	ev := r.Policy(f.dir).Identify(audit.Event{})
	if ev.Integration != "com.acme.erp" || ev.IntegrationVersion != "1.0.0" {
		t.Fatalf("an event while 1.1.0 waits names %s %s", ev.Integration, ev.IntegrationVersion)
	}
}
