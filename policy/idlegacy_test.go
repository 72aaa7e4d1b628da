package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// forgetFolders rewrites f's version memory in the first layout (records by
// id alone), as an egressd from before folder binding wrote it.
func (f *fixture) forgetFolders() {
	f.t.Helper()
	s, err := (&Memory{dir: f.state}).Read()
	if err != nil {
		f.t.Fatal(err)
	}
	data, _ := json.Marshal(s.IDs)
	if err := os.WriteFile(StatePath(f.state), data, 0o600); err != nil {
		f.t.Fatal(err)
	}
	// An earlier egressd wrote no newest-write mark in versions.lock.
	if err := os.Truncate(filepath.Join(f.state, lockFile), 0); err != nil {
		f.t.Fatal(err)
	}
}

// TestLegacyIDIsNotHandedToTheFirstFolderThatLoadsIt is the attacker's
// upgrade take-over: version memory from an earlier egressd binds an id to
// no folder, and a hostile folder claiming it at 9.0.0 was bound to it on
// its first load, raising the floor (the real folder's 1.1.0 was then
// refused, even after approval). Its claim now waits; the record keeps its
// floor; the real folder waits too until the operator binds it, once.
func TestLegacyIDIsNotHandedToTheFirstFolderThatLoadsIt(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	f.forgetFolders()

	b, cfgB := f.second("127.0.0.1:0", "com.acme.erp", "9.0.0", "erp.acme.example", "evil.example")
	for range 2 {
		r := f.registry()
		out := loadOne(t, r, cfgB, Pending)
		for _, want := range []string{"version memory binds com.acme.erp to no folder",
			"egressd approve --state " + f.state + " --manifest " + ManifestPlace(filepath.Join(b, "manifest.json"))} {
			if !strings.Contains(out.Notice, want) {
				t.Fatalf("notice lacks %q: %s", want, out.Notice)
			}
		}
		p := r.Policy(b)
		if d := p.Decide("erp.acme.example", 443); d.Verdict.Permits() || d.Reason != PendingApproval ||
			!strings.Contains(Sentence(d, p), "egressd approve --state "+f.state+" --manifest "+ManifestPlace(filepath.Join(b, "manifest.json"))) {
			t.Fatalf("a claim of an unbound id allows its list: %+v %s", d, Sentence(d, p))
		}
	}
	s, _ := (&Memory{dir: f.state}).Read()
	if r := s.IDs["com.acme.erp"]; r.Version != "1.0.0" {
		t.Fatalf("the claim raised the floor: %+v", r)
	}
	if got := s.FoldersOf("com.acme.erp"); len(got) != 0 {
		t.Fatalf("the claim bound a folder: %v", got)
	}

	f.write("com.acme.erp", "1.1.0", "erp.acme.example")
	f.load(f.registry(), Pending) // the real folder waits too: memory cannot tell it from b
	mem, _ := OpenMemory(f.state)
	r := f.registry()
	r.Load(f.cfg)
	if a, err := mem.ApproveManifest(r.Policy(f.dir).Manifest, ManifestPlace(filepath.Join(f.dir, "manifest.json")), false, nil); err != nil || len(a) != 1 || !strings.HasPrefix(a[0].What, "the claim of") {
		t.Fatalf("approve --manifest: %+v %v", a, err)
	}
	f.load(f.registry(), Loaded)
	s, _ = mem.Read()
	if got := s.FoldersOf("com.acme.erp"); len(got) != 1 || got[0] != ManifestPlace(filepath.Join(f.dir, "manifest.json")) {
		t.Fatalf("folders of the id after approval: %v", got)
	}
	if out := loadOne(t, f.registry(), cfgB, Pending); !strings.Contains(out.Notice, "binds to folder "+ManifestPlace(filepath.Join(f.dir, "manifest.json"))) {
		t.Fatalf("b's claim after the binding: %s", out.Notice)
	}
}

// TestLegacyIDStateGoesOnlyToTheApprovedFolder: the sandbox state an
// earlier egressd kept under the id alone is inherited by the folder whose
// load bound the id from memory that bound it to no place, which only an
// approval does, never by a folder that merely claims it.
func TestLegacyIDStateGoesOnlyToTheApprovedFolder(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	f.forgetFolders()
	mem, _ := OpenMemory(f.state)
	folder := ManifestPlace(filepath.Join(f.dir, "manifest.json"))

	before, _ := mem.Read()
	f.load(f.registry(), Pending)
	after, _ := mem.Read()
	if before.InheritsIDState("com.acme.erp", folder, after) {
		t.Fatal("a waiting claim inherits the id's state")
	}
	r := f.registry()
	r.Load(f.cfg)
	if _, err := mem.ApproveManifest(r.Policy(f.dir).Manifest, folder, false, nil); err != nil {
		t.Fatal(err)
	}
	before, _ = mem.Read()
	f.load(f.registry(), Loaded)
	after, _ = mem.Read()
	if !before.InheritsIDState("com.acme.erp", folder, after) {
		t.Fatal("the approved folder does not inherit the id's state")
	}
	_, cfgB := f.second("127.0.0.1:0", "com.acme.erp", "1.0.0", "erp.acme.example")
	before, _ = mem.Read()
	loadOne(t, f.registry(), cfgB, Pending)
	after, _ = mem.Read()
	if before.InheritsIDState("com.acme.erp", ManifestPlace(filepath.Join(cfgB.Integrations[0].Manifest, "manifest.json")), after) {
		t.Fatal("a claim inherits the id's state")
	}
}

// TestLegacyIDBoundOnlyToAListenerWaitsForTheOperator: memory from an
// egressd that bound ids to listeners too, where only the listener's
// binding is left, does not say which folder owns the id (a listener is
// not a place: issue 17, fifth attacker). The folder's load waits, as for
// any id bound to no folder, until the operator binds it.
func TestLegacyIDBoundOnlyToAListenerWaitsForTheOperator(t *testing.T) {
	f := newFixture(t)
	f.cfg.Integrations[0].Listen = "127.0.0.1:18080"
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	mem, _ := OpenMemory(f.state)
	mem.update(func(s *State) error { // the folder's binding lost, the listener's kept
		delete(s.Folders, ManifestPlace(filepath.Join(f.dir, "manifest.json")))
		s.Folders[listenerPlace+"127.0.0.1:18080"] = Folder{ID: "com.acme.erp"}
		return nil
	})
	r := f.registry()
	if out := f.load(r, Pending); !strings.Contains(out.Notice, "binds com.acme.erp to no folder") || f.allows(r, "erp.acme.example") {
		t.Fatalf("a listener's binding placed the id: %+v", out)
	}
}
