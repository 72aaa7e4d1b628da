package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// second is another manifest folder beside f's, with its own config entry.
func (f *fixture) second(listen, id, version string, hosts ...string) (dir string, cfg Config) {
	f.t.Helper()
	g := *f
	g.dir = f.t.TempDir()
	g.write(id, version, hosts...)
	cfg = f.cfg
	cfg.Integrations = []Integration{{Manifest: g.dir, Listen: listen}}
	return g.dir, cfg
}

func loadOne(t *testing.T, r *Registry, cfg Config, want Result) Outcome {
	t.Helper()
	outs := r.Load(cfg)
	if len(outs) != 1 || outs[0].Result != want {
		t.Fatalf("Load = %+v, want result %s", outs, want)
	}
	return outs[0]
}

// TestIDClaimedFromAnotherFolderWaitsAndKeepsNothing is issue 12's open
// High in version memory: a manifest in another folder that claims a known
// id at a higher version with a wider list is pending in every process,
// with nothing in force, and the id's floor and list stay the first
// folder's.
func TestIDClaimedFromAnotherFolderWaitsAndKeepsNothing(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	b, cfgB := f.second("127.0.0.1:0", "com.acme.erp", "9.0.0", "erp.acme.example", "evil.example")
	for range 2 {
		r := f.registry()
		out := loadOne(t, r, cfgB, Pending)
		for _, want := range []string{filepath.Join(b, "manifest.json") + " claims the id com.acme.erp 9.0.0", "binds to folder " + ManifestPlace(filepath.Join(f.dir, "manifest.json")),
			"egressd approve --state " + f.state + " --folder " + b + " --digest sha256:", " com.acme.erp 9.0.0 lets this folder", "egressd state --state " + f.state + " forget com.acme.erp"} {
			if !strings.Contains(out.Notice, want) {
				t.Fatalf("notice lacks %q: %s", want, out.Notice)
			}
		}
		p := r.Policy(b)
		if d := p.Decide("erp.acme.example", 443); d.Verdict.Permits() || d.Reason != PendingApproval ||
			!strings.Contains(Sentence(d, p), "until then nothing is allowed for it") {
			t.Fatalf("a pending claim allows the id's list: %+v %s", d, Sentence(d, p))
		}
	}
	f.load(f.registry(), Loaded) // the first folder's 1.0.0 still loads
	s, _ := (&Memory{dir: f.state}).Read()
	if r := s.IDs["com.acme.erp"]; r.Version != "1.0.0" || len(r.Approved.Entries) != 1 {
		t.Fatalf("the claim changed the id's record: %+v", r)
	}
	if got := s.FoldersOf("com.acme.erp"); len(got) != 1 || got[0] != ManifestPlace(filepath.Join(f.dir, "manifest.json")) {
		t.Fatalf("folders of the id: %v", got)
	}
}

// TestApprovedClaimJoinsTheIDAndForgetRemovesIt: approving the claim binds
// the second folder to the id too (and no other claim rides along); forget
// removes the id once the claim waiting for it is dropped.
func TestApprovedClaimJoinsTheIDAndForgetRemovesIt(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	b, cfgB := f.second("127.0.0.1:0", "com.acme.erp", "1.0.0", "erp.acme.example")
	loadOne(t, f.registry(), cfgB, Pending)
	mem, _ := OpenMemory(f.state)
	a, err := mem.ApprovePending("com.acme.erp", "1.0.0", "", ManifestPlace(filepath.Join(b, "manifest.json")), nil)
	if err != nil || len(a) != 1 || !strings.Contains(a[0].What, "the claim of "+ManifestPlace(filepath.Join(b, "manifest.json"))+" to com.acme.erp (bound to folder ") {
		t.Fatalf("approve: %+v %v", a, err)
	}
	r := f.registry()
	loadOne(t, r, cfgB, Loaded)
	if !r.Policy(b).Decide("erp.acme.example", 443).Verdict.Permits() {
		t.Fatal("the approved claim does not apply")
	}
	s, _ := mem.Read()
	if got := s.FoldersOf("com.acme.erp"); len(got) != 2 {
		t.Fatalf("folders of the id after approval: %v", got)
	}

	c, cfgC := f.second("127.0.0.1:0", "com.acme.erp", "1.0.0", "erp.acme.example")
	loadOne(t, f.registry(), cfgC, Pending)
	// While C's claim waits, forgetting the id would hand it to whichever
	// folder loads first (round 17): C's claim is dropped deliberately first.
	if _, _, err := mem.Forget("com.acme.erp"); err == nil || !strings.Contains(err.Error(), "forget --folder") {
		t.Fatalf("forget while a claim waits: %v", err)
	}
	if _, _, err := mem.ForgetFolder(filepath.Join(c, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := mem.Forget("com.acme.erp"); err != nil {
		t.Fatal(err)
	}
	if s, _ := mem.Read(); len(s.Folders) != 0 {
		t.Fatalf("forget left folders: %+v", s.Folders)
	}
	loadOne(t, f.registry(), cfgC, Loaded) // a first load now
}

// TestClaimDoesNotRideAlongWithTheIDsOwnWidening: the owner's widening to
// 1.1.0 and a foreign claim of the same list at 1.1.0 are two decisions;
// "egressd approve ID 1.1.0" approves the widening alone, and the claim
// still waits.
func TestClaimDoesNotRideAlongWithTheIDsOwnWidening(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	f.write("com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
	f.load(f.registry(), Pending)
	_, cfgB := f.second("127.0.0.1:0", "com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
	loadOne(t, f.registry(), cfgB, Pending)
	mem, _ := OpenMemory(f.state)
	if a, err := mem.ApprovePending("com.acme.erp", "1.1.0", "", "", nil); err != nil || len(a) != 1 || a[0].What != "a widening" {
		t.Fatalf("approved together: %+v %v", a, err)
	}
	loadOne(t, f.registry(), cfgB, Pending)
}

// TestApproveManifestOfAForeignFolderApprovesItsClaimNotAWidening: approving
// the second folder's manifest by path used to record a widening of the
// id (the folder was unbound), which the owner's next load then took.
func TestApproveManifestOfAForeignFolderApprovesItsClaimNotAWidening(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	b, cfgB := f.second("127.0.0.1:0", "com.acme.erp", "1.1.0", "erp.acme.example", "evil.example")
	r := f.registry()
	loadOne(t, r, cfgB, Pending)
	mem, _ := OpenMemory(f.state)
	a, err := mem.ApproveManifest(r.Policy(b).Manifest, ManifestPlace(filepath.Join(b, "manifest.json")), false, nil)
	if err != nil || len(a) != 1 || !strings.HasPrefix(a[0].What, "the claim of") {
		t.Fatalf("approve --manifest: %+v %v", a, err)
	}
	f.write("com.acme.erp", "1.1.0", "erp.acme.example", "evil.example")
	if out := f.load(f.registry(), Pending); out.Pending != "1.1.0" {
		t.Fatalf("the owner took the foreign folder's approval: %+v", out)
	}
}

// TestNewFolderOnTheIDsListenerIsAClaimLikeAnyOther: a listener is not a
// place (issue 17, fifth attacker): a new folder claiming a known id waits
// for the operator whichever listener it is served on, the id's old one
// included.
func TestNewFolderOnTheIDsListenerIsAClaimLikeAnyOther(t *testing.T) {
	f := newFixture(t)
	f.cfg.Integrations[0].Listen = "127.0.0.1:18080"
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	_, moved := f.second("127.0.0.1:18080", "com.acme.erp", "1.0.0", "erp.acme.example")
	loadOne(t, f.registry(), moved, Pending)
	_, other := f.second("127.0.0.1:18081", "com.acme.erp", "1.0.0", "erp.acme.example")
	loadOne(t, f.registry(), other, Pending)
}

// TestWidenAutoDoesNotLetAClaimIn: widen: auto is the operator's word
// that this entry's own widenings need no approval; a claim of an id bound
// to another folder is not one, and waits for egressd approve.
func TestWidenAutoDoesNotLetAClaimIn(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	_, cfgB := f.second("127.0.0.1:0", "com.acme.erp", "1.0.0", "erp.acme.example")
	cfgB.Integrations[0].Widen = WidenAuto
	if out := loadOne(t, f.registry(), cfgB, Pending); !strings.Contains(out.Notice, "claims the id com.acme.erp") {
		t.Fatalf("notice %q", out.Notice)
	}
}

// TestStateFolderWithNoIDMustHoldAClaim: a folder entry with an empty id
// is only what holdClaim writes.
func TestStateFolderWithNoIDMustHoldAClaim(t *testing.T) {
	d := "sha256:" + strings.Repeat("a", 64)
	claim := `{"egressd_state":2,"ids":{},"folders":{"/srv/b":{"id":"","pending":{"id":"com.acme.erp","version":"1.0.0","digest":"` + d + `"}}}}`
	if _, err := DecodeState([]byte(claim)); err != nil {
		t.Fatalf("a claim: %v", err)
	}
	for _, doc := range []string{
		`{"egressd_state":2,"ids":{},"folders":{"/srv/b":{"id":""}}}`,
		strings.Replace(claim, `"/srv/b"`, `"listener 127.0.0.1:1"`, 1),
	} {
		if _, err := DecodeState([]byte(doc)); err == nil {
			t.Errorf("accepted %s", doc)
		}
	}
}

// TestDeployLinkSwapKeepsTheIntegrationsPlace: the folder key is the path
// the operator named, so "ln -sfn releases/v2 current" leaves the
// integration in place (no claim, and an id change there still waits); a
// second spelling of the same directory is another folder whose claim
// waits (TestDeployLinkPointedAtAnotherFolderIsAClaim), as a copy's does.
func TestDeployLinkSwapKeepsTheIntegrationsPlace(t *testing.T) {
	f := newFixture(t)
	root := t.TempDir()
	for v, version := range map[string]string{"v1": "1.0.0", "v2": "1.1.0", "copy": "1.2.0"} {
		g := *f
		g.dir = filepath.Join(root, v)
		os.MkdirAll(g.dir, 0o755)
		g.write("com.acme.erp", version, "erp.acme.example")
	}
	current := filepath.Join(root, "current")
	os.Symlink("v1", current)
	f.cfg.Integrations[0].Manifest = current
	loadOne(t, f.registry(), f.cfg, Loaded)
	os.Symlink("v2", current+".tmp")
	os.Rename(current+".tmp", current)
	loadOne(t, f.registry(), f.cfg, Loaded)

	alias := f.cfg
	alias.Integrations = []Integration{{Manifest: filepath.Join(root, "v2"), Listen: "127.0.0.1:0"}}
	loadOne(t, f.registry(), alias, Pending) // the directory current names now, by another path
	other := f.cfg
	other.Integrations = []Integration{{Manifest: filepath.Join(root, "copy"), Listen: "127.0.0.1:0"}}
	loadOne(t, f.registry(), other, Pending)
}

// TestDeployLinkPointedAtAnotherFolderIsAClaim is the attacker's deploy-link
// take-over: a hostile integration controls its own link ".../evil/current"
// and points it at the victim's folder for its first load. Folders were
// compared by the directory they resolve to, so the link was bound to the
// victim's id with no approval; flipped to a release claiming the id at
// 99.0.0, it raised the floor and the victim's next release was refused.
// A path is its own folder: the claim waits and raises nothing.
func TestDeployLinkPointedAtAnotherFolderIsAClaim(t *testing.T) {
	f := newFixture(t)
	f.write("com.victim.app", "1.0.0", "api.victim.example")
	f.load(f.registry(), Loaded)
	evil := t.TempDir()
	g := *f
	g.dir = filepath.Join(evil, "v2")
	os.Mkdir(g.dir, 0o755)
	g.write("com.victim.app", "99.0.0", "api.victim.example", "evil.example")
	current := filepath.Join(evil, "current")
	if err := os.Symlink(f.dir, current); err != nil {
		t.Fatal(err)
	}
	cfgE := f.cfg
	cfgE.Integrations = []Integration{{Manifest: current, Listen: "127.0.0.1:0"}}
	loadOne(t, f.registry(), cfgE, Pending)
	os.Remove(current)
	os.Symlink("v2", current)
	loadOne(t, f.registry(), cfgE, Pending)

	f.write("com.victim.app", "1.1.0", "api.victim.example")
	r := f.registry()
	f.load(r, Loaded)
	if !f.allows(r, "api.victim.example") {
		t.Fatal("the victim's next release is not in force")
	}
	s, _ := (&Memory{dir: f.state}).Read()
	if got := s.FoldersOf("com.victim.app"); len(got) != 1 || got[0] != ManifestPlace(filepath.Join(f.dir, "manifest.json")) {
		t.Fatalf("folders of the victim's id: %v", got)
	}
}
