package proxy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// deepLinkChain is the round-6 attacker's s2_deep_links.sh in dir, which
// the integration owns: a folder as deep as a path allows, 40 links in it
// each pointing (absolutely, ~4,000 bytes) to the next, the last to a real
// manifest, and name in dir swapped for a link to the first.
func deepLinkChain(t testing.TB, dir, name string, manifest []byte) string {
	t.Helper()
	levels := (3900 - len(dir)) / 2
	deep := filepath.Join(dir, ".d", strings.Repeat("a/", levels))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "M"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		os.Symlink(filepath.Join(deep, fmt.Sprintf("%s.%d", name, i+1)), filepath.Join(deep, fmt.Sprintf("%s.%d", name, i)))
	}
	os.Symlink(filepath.Join(deep, "M"), filepath.Join(deep, name+".40"))
	tmp := filepath.Join(dir, "."+name+".new")
	if err := os.Symlink(filepath.Join(deep, name+".0"), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	return deep
}

// TestADeepLinkChainCostsTheWatcherABoundedWalk: the watcher lstat'ed
// every prefix of the path from the root for every link (80,000 lstat
// calls of ~2,000 components each per resolve, three resolves per check).
// Now a resolve examines at most maxComponents components and stops,
// saying why, and the file sums as unresolvable without being opened.
func TestADeepLinkChainCostsTheWatcherABoundedWalk(t *testing.T) {
	dir := t.TempDir()
	deepLinkChain(t, dir, "manifest.json", []byte(`{}`))
	c := resolveChain(filepath.Join(dir, "manifest.json"))
	if c.components > 256 || !strings.Contains(c.tooDeep, "more than 256 path components") {
		t.Fatalf("the chain took %d components (lstat calls), want at most 256; tooDeep %q", c.components, c.tooDeep)
	}
	w := WatchSet{Files: []string{filepath.Join(dir, "manifest.json")}}
	r := w.resolve()
	if print := w.fingerprint(r); print != w.fingerprint(w.resolve()) {
		t.Fatal("an unresolvable path's fingerprint changes from check to check: every check would reload")
	}
	writers := manifestWriters(filepath.Join(dir, "manifest.json"))
	if len(writers) == 0 || !strings.Contains(writers[0], "resolves through more than 256 path components") {
		t.Fatalf("no sentence says the path is past the bounds: %q", writers)
	}
	for _, w := range writers {
		if len(w) > 600 {
			t.Fatalf("a %d-byte sentence: %.200s", len(w), w)
		}
	}
}

// A ConfigMap path (a link to ..data/name, ..data a link to a timestamped
// folder) and an "ln -sfn" deploy link resolve as the kernel resolves
// them, ".." after a link included, well within the bounds.
func TestResolveChainFollowsLinksAsTheKernelDoes(t *testing.T) {
	dir := t.TempDir()
	ts := filepath.Join(dir, "..2026_12_01_06_00_00.1")
	os.MkdirAll(filepath.Join(ts, "sub"), 0o755)
	os.WriteFile(filepath.Join(ts, "manifest.json"), []byte(`{}`), 0o644)
	os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data"))
	os.Symlink("..data/manifest.json", filepath.Join(dir, "manifest.json"))
	os.Symlink("..data/sub", filepath.Join(dir, "deploy"))
	os.Symlink("deploy/../manifest.json", filepath.Join(dir, "dotdot.json"))
	for _, name := range []string{"manifest.json", "dotdot.json"} {
		c := resolveChain(filepath.Join(dir, name))
		want, err := filepath.EvalSymlinks(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if c.final != want || c.tooDeep != "" || c.components > 32 {
			t.Errorf("%s: resolved to %s (%d components, %q), the kernel to %s", name, c.final, c.components, c.tooDeep, want)
		}
	}
}
