package policy

import (
	"strings"
	"testing"
)

// takeoverFixture serves A (com.t.a) and the victim (com.t.victim) once,
// each in its folder on a fixed listener, then rewrites A's manifest to the
// victim's id at 5.0.0 with A's own list, and returns the config that
// serves A alone (the victim retired for now) with gate set on A's entry.
func takeoverFixture(t *testing.T, gate func(in *Integration, digestOfA string)) (*fixture, Config) {
	t.Helper()
	a := newFixture(t)
	a.cfg.Integrations[0].Listen = "127.0.0.1:47193"
	a.write("com.t.a", "1.0.0", "api.a.example")
	v, cfgV := a.second("127.0.0.1:47194", "com.t.victim", "1.0.0", "api.victim.example")
	both := a.cfg
	both.Integrations = []Integration{a.cfg.Integrations[0], cfgV.Integrations[0]}
	r := a.registry()
	for _, o := range r.Load(both) {
		if o.Result != Loaded {
			t.Fatalf("first load: %+v", o)
		}
	}
	digestOfA := r.Policy(a.dir).Manifest.Digest()
	_ = v
	a.write("com.t.victim", "5.0.0", "api.a.example")
	gate(&a.cfg.Integrations[0], digestOfA)
	return a, a.cfg
}

// assertVictimUntouched checks version memory still holds the victim's
// own record (floor 1.0.0, its own list) and A's folder still bound to A.
func assertVictimUntouched(t *testing.T, f *fixture) {
	t.Helper()
	s, err := (&Memory{dir: f.state}).Read()
	if err != nil {
		t.Fatal(err)
	}
	r := s.IDs["com.t.victim"]
	if r.Version != "1.0.0" || len(r.Approved.Entries) != 1 || r.Approved.Entries[0] != "api.victim.example" {
		t.Fatalf("the takeover rewrote the victim's record: %+v", r)
	}
	if got := s.Folders[ManifestPlace(f.dir+"/manifest.json")].ID; got != "com.t.a" {
		t.Fatalf("A's folder is now bound to %q", got)
	}
}

// TestPinnedDigestDoesNotApproveAnIDTakeover: A's pin_digest (its list's
// digest) does not approve A renaming itself to another integration's id
// with the same list: the change waits, the victim's record and floor are
// untouched, and A's own approved list stays in force.
func TestPinnedDigestDoesNotApproveAnIDTakeover(t *testing.T) {
	f, cfg := takeoverFixture(t, func(in *Integration, d string) { in.PinDigest = d })
	for range 2 { // in this process and the next
		r := f.registry()
		out := loadOne(t, r, cfg, Pending)
		if !strings.Contains(out.Notice, "changed its id from com.t.a to com.t.victim 5.0.0") {
			t.Fatalf("notice %q", out.Notice)
		}
		if p := r.Policy(f.dir); p.PendingIDFrom != "com.t.a" || !p.Decide("api.a.example", 443).Verdict.Permits() {
			t.Fatalf("A's approved list is not the one in force: %+v", p)
		}
		assertVictimUntouched(t, f)
	}
}

// TestWidenAutoDoesNotApproveAnIDTakeover: widen: auto approves widenings
// of the entry's own id only, not a rename to another integration's id.
func TestWidenAutoDoesNotApproveAnIDTakeover(t *testing.T) {
	f, cfg := takeoverFixture(t, func(in *Integration, _ string) { in.Widen = WidenAuto })
	loadOne(t, f.registry(), cfg, Pending)
	assertVictimUntouched(t, f)
}

// TestPinnedDigestDoesNotApproveAClaimFromANewFolder: a new folder on a
// new listener whose pin matches its list still waits to claim a bound id.
func TestPinnedDigestDoesNotApproveAClaimFromANewFolder(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	_, cfgB := f.second("127.0.0.1:0", "com.acme.erp", "9.0.0", "erp.acme.example", "evil.example")
	r := f.registry()
	probe := NewRegistry(InMemory(), nil)
	loadOne(t, probe, cfgB, Loaded)
	cfgB.Integrations[0].PinDigest = probe.Policy(cfgB.Integrations[0].Manifest).Manifest.Digest()
	loadOne(t, r, cfgB, Pending)
	s, _ := (&Memory{dir: f.state}).Read()
	if rec := s.IDs["com.acme.erp"]; rec.Version != "1.0.0" {
		t.Fatalf("the pinned claim raised the floor: %+v", rec)
	}
}

// TestPinnedDigestStillApprovesAWideningOfItsOwnID: the pin keeps its job.
func TestPinnedDigestStillApprovesAWideningOfItsOwnID(t *testing.T) {
	f := newFixture(t)
	f.cfg.Integrations[0].Listen = "127.0.0.1:47193"
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	f.write("com.acme.erp", "1.1.0", "erp.acme.example", "more.acme.example")
	probe := NewRegistry(InMemory(), nil)
	loadOne(t, probe, f.cfg, Loaded)
	f.cfg.Integrations[0].PinDigest = probe.Policy(f.dir).Manifest.Digest()
	r := f.registry()
	f.load(r, Loaded)
	if !f.allows(r, "more.acme.example") {
		t.Fatal("the pinned widening is not in force")
	}
}

// TestWaitingRenameDoesNotKeepTheVictimFromBeingServed: while A's rename
// to the victim's id waits, A is still com.t.a; the victim re-added to the
// config is served beside it, not refused as a duplicate of A.
func TestWaitingRenameDoesNotKeepTheVictimFromBeingServed(t *testing.T) {
	f, cfg := takeoverFixture(t, func(*Integration, string) {})
	loadOne(t, f.registry(), cfg, Pending)
	_, cfgV := f.second("127.0.0.1:47194", "com.t.victim", "1.0.0", "api.victim.example")
	both := cfg
	both.Integrations = []Integration{cfg.Integrations[0], cfgV.Integrations[0]}
	outs := f.registry().Load(both)
	if len(outs) != 2 || outs[0].Result != Pending || outs[1].Result == Failed {
		t.Fatalf("Load = %+v", outs)
	}
}
