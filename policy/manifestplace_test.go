package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestManifestPlaceIsTheFolderOnlyForAStandardName: a standard-named
// manifest keeps the folder as its place (version memory and sandbox state
// written before stay valid), and a file of any other name is its own.
func TestManifestPlaceIsTheFolderOnlyForAStandardName(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"/srv/m/voiceos.integration.json", "/srv/m"},
		{"/srv/m/manifest.json", "/srv/m"},
		{"/srv/m/./manifest.json", "/srv/m"},
		{"/srv/m/a.json", "/srv/m/a.json"},
		{"/srv/m/b.json", "/srv/m/b.json"},
		{"/srv/m/Manifest.json", "/srv/m/Manifest.json"}, // another name: a place of its own, never the folder's
		{"/srv/m/x/../a.json", "/srv/m/a.json"},
	} {
		if got := ManifestPlace(c.file); got != c.want {
			t.Errorf("ManifestPlace(%s) = %s, want %s", c.file, got, c.want)
		}
	}
	if got, want := PlaceOf("/srv/m/a.json"), "/srv/m/a.json"; got != want {
		t.Errorf("PlaceOf(file) = %s, want %s", got, want)
	}
	if got, want := PlaceOf("/srv/m/voiceos.integration.json"), "/srv/m"; got != want {
		t.Errorf("PlaceOf(standard file) = %s, want %s", got, want)
	}
}

// TestSecondManifestFileInAFolderClaimingTheFirstsIDWaits: with a file
// its own place, a second file of the same folder that declares the
// first's id is a claim, like one from another folder: pending, nothing
// allowed, the id's record untouched; and the first file changing its id
// is still an id change of that file.
func TestSecondManifestFileInAFolderClaimingTheFirstsIDWaits(t *testing.T) {
	f := newFixture(t)
	write := func(name, id, version, host string) string {
		file := filepath.Join(f.dir, name)
		doc := `{"manifest_version":1,"id":"` + id + `","version":"` + version + `","network":{"connect":["` + host + `"]}}`
		if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	cfgOf := func(file string) Config {
		cfg := f.cfg
		cfg.Integrations = []Integration{{Manifest: file, Listen: "127.0.0.1:0"}}
		return cfg
	}
	a := write("a.json", "com.acme.a", "1.0.0", "a.example")
	loadOne(t, f.registry(), cfgOf(a), Loaded)
	b := write("b.json", "com.acme.a", "1.1.0", "evil.example") // at 1.0.0 with another list no approval could apply it: refused
	for range 2 {
		r := f.registry()
		out := loadOne(t, r, cfgOf(b), Pending)
		if !strings.Contains(out.Notice, b+" claims the id com.acme.a") || !strings.Contains(out.Notice, "binds to folder "+a) {
			t.Fatalf("notice: %s", out.Notice)
		}
		if r.Policy(b).Decide("a.example", 443).Verdict.Permits() || r.Policy(b).Decide("evil.example", 443).Verdict.Permits() {
			t.Fatal("a pending claim from a second file of the folder allows something")
		}
	}
	if r := loadOne(t, f.registry(), cfgOf(a), Loaded); r.ID != "com.acme.a" {
		t.Fatalf("the first file: %+v", r)
	}
	write("a.json", "com.acme.a2", "1.0.0", "a.example")
	if out := loadOne(t, f.registry(), cfgOf(a), Pending); !strings.Contains(out.Notice, "changed its id from com.acme.a") {
		t.Fatalf("the first file's id change: %s", out.Notice)
	}
}

// TestAManifestSwappedForAFolderAfterItsReadKeepsItsFoldersPlace: round
// 33's race2.sh exchanged a folder in at the manifest's name (renameat2
// RENAME_EXCHANGE) between egressd's read of the file and its second look
// at the path, which made the place the manifest's own path: new to
// version memory, so a new id there loaded as a first load, its list in
// force without approval. The place of a file egressd read follows from
// the file's name alone.
func TestAManifestSwappedForAFolderAfterItsReadKeepsItsFoldersPlace(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "voiceos.integration.json")
	if err := os.Mkdir(file, 0o755); err != nil { // what stands there after the read
		t.Fatal(err)
	}
	if got := ManifestPlace(file); got != dir {
		t.Fatalf("the place of the manifest read at %s is %s, want its folder %s", file, got, dir)
	}
	if got := PlaceOf(file); got != file {
		t.Fatalf("a folder the operator names is that folder: PlaceOf = %s", got)
	}
}

// TestForgetFolderActsOnThePlaceStateListPrintsEvenWhenAFileStandsThere:
// a place named like a manifest file (bound by an older egressd, or by
// the race above) is forgotten by the name state list prints for it, not
// its parent folder, also once a file stands at that path again (round
// 33: forget --folder with the printed place forgot the parent's binding
// and left the stray place). With the exact place gone, the name stands
// for its folder again.
func TestForgetFolderActsOnThePlaceStateListPrintsEvenWhenAFileStandsThere(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "voiceos.integration.json")
	if err := os.WriteFile(file, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	mem, err := OpenMemory(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.update(func(s *State) error {
		s.Folders[dir] = Folder{ID: "com.test.good"}
		s.Folders[file] = Folder{ID: "com.test.evil"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ place, id string }{{file, "com.test.evil"}, {dir, "com.test.good"}} {
		place, f, err := mem.ForgetFolder(file)
		if err != nil || place != want.place || f.ID != want.id {
			t.Fatalf("forget --folder %s: forgot %s (%s), %v; want %s (%s)", file, place, f.ID, err, want.place, want.id)
		}
	}
}

// TestForgetSaysItReleasesAWideningThatWaits: round 36. serve's advice on
// a version below the floor is to forget the id; a widening that waited
// for approval then loaded as a first load, list and all, and forget said
// only "a first load, with any list". It names the list it releases.
func TestForgetSaysItReleasesAWideningThatWaits(t *testing.T) {
	f := newFixture(t)
	f.write("com.acme.erp", "1.0.0", "erp.acme.example")
	f.load(f.registry(), Loaded)
	f.write("com.acme.erp", "2.0.0", "erp.acme.example", "evil.example")
	f.load(f.registry(), Pending)
	mem, err := OpenMemory(f.state)
	if err != nil {
		t.Fatal(err)
	}
	_, dropped, err := mem.Forget("com.acme.erp")
	if err != nil || len(dropped) != 1 || !strings.Contains(dropped[0], "evil.example") || !strings.Contains(dropped[0], "waited for approval") {
		t.Fatalf("forget: %q %v", dropped, err)
	}
}
