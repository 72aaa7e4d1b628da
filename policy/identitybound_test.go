package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/audit"
)

// A reload to an id beyond the bound (one the audit log could not tell
// from its twin) keeps the last good policy and says why.
func TestReloadToAnOverLongIDKeepsTheLastGood(t *testing.T) {
	f := newFixture(t)
	r := f.registry()
	f.write("com.a18.benign", "1.0.0", "api.benign.example")
	f.load(r, Loaded)
	long := "com.a18." + strings.Repeat("x", 250) + ".hostile"
	f.write(long, "1.0.1", "api.hostile.example")
	out := f.load(r, KeptLastGood)
	if want := fmt.Sprintf("id: %d bytes; an id is at most %d bytes", len(long), allowlist.MaxIDLength); out.Err == nil || !strings.Contains(out.Err.Error(), want) {
		t.Fatalf("err = %v, want %q", out.Err, want)
	}
	if !f.allows(r, "api.benign.example") || f.allows(r, "api.hostile.example") {
		t.Fatal("last good policy not in force")
	}
}

// A first load of an over-long list fails: what is enforced is always what
// the policy event records.
func TestFirstLoadOfAListLongerThanTheAuditRecordFails(t *testing.T) {
	f := newFixture(t)
	r := f.registry()
	var hosts []string
	for i := 0; i <= allowlist.MaxEntries; i++ {
		hosts = append(hosts, fmt.Sprintf("h%d.example.com", i))
	}
	f.write("com.a18.bigl", "1.0.0", hosts...)
	f.load(r, Failed)
	if r.Policy(f.dir) != nil {
		t.Fatal("an over-long list has a policy")
	}
}

// One bound for the network list: every list a manifest may hold is one a
// policy event records whole.
func TestEveryListAManifestMayHoldIsRecordedWhole(t *testing.T) {
	if allowlist.MaxEntries > audit.MaxPolicyEntries {
		t.Fatalf("a manifest may list %d entries, a policy event records %d", allowlist.MaxEntries, audit.MaxPolicyEntries)
	}
}
