package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAManifestFileSwappedForAFolderOfThatNameDoesNotLoadANewIDAsAFirstLoad
// is round 32's trust-chain attack: the operator names the manifest file
// (`egressd run --manifest a/manifest.json`, as the README shows, or a
// config's `manifest: …/a/manifest.json`); the author's next release puts
// a folder named manifest.json in its place, holding a manifest.json with
// a new id and any list. egressd read the inner file, took the folder
// a/manifest.json for a new place (a folder is a place whatever its name)
// and loaded the new id as a first load: no approval, no notice, its list
// in force. A path named like a manifest file must be a regular file:
// such a folder is refused, and nothing is recorded for it.
func TestAManifestFileSwappedForAFolderOfThatNameDoesNotLoadANewIDAsAFirstLoad(t *testing.T) {
	state, w := t.TempDir(), t.TempDir()
	a := filepath.Join(w, "a")
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(erpFolder(t, a, "com.test.swap", "1.0.0", "a.example"), "manifest.json")
	run := func() (string, int) {
		_, errs, code := runBinary(t, "run", "--insecure-env-only", "--state", state, "--manifest", named, "--", "true")
		return errs, code
	}
	if errs, code := run(); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, errs)
	}
	if err := os.Remove(named); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(named, 0o755); err != nil {
		t.Fatal(err)
	}
	erpFolder(t, named, "com.test.evil", "1.0.0", "evil.example")
	errs, code := run()
	if code == 0 || !strings.Contains(errs, "regular file") {
		t.Fatalf("a folder in the manifest file's place: exit %d, want a refusal naming it\n%s", code, errs)
	}
	out, lerrs, lcode := runBinary(t, "state", "--state", state, "list")
	if lcode != 0 {
		t.Fatalf("state list: exit %d\n%s", lcode, lerrs)
	}
	if strings.Contains(out, "com.test.evil") {
		t.Fatalf("the swapped-in id was recorded:\n%s", out)
	}
	if explain, _, _ := runBinary(t, "explain", "--state", state, "--manifest", named, "evil.example"); strings.HasPrefix(explain, "allow") {
		t.Fatalf("explain allows the swapped-in list: %s", explain)
	}
}
