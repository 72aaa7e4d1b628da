package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostileManifest is a second integration, com.test.hostile.
func hostileManifest(version string) []byte {
	return []byte(`{"manifest_version":1,"id":"com.test.hostile","version":"` + version + `","network":{"connect":["api.hostile.example"]}}`)
}

// TestAnIntegrationsDeepLinkChainsDoNotDelayTheOperatorsChangeToAnother is
// the round-6 attacker's s2_deep_links.sh: an integration that owns its
// folder swaps both manifest names for chains of 40 links, each ~4,000
// bytes into a folder ~1,900 levels deep. The watcher resolved them by
// hand, an lstat per prefix from the root per link, three times a check:
// a core stayed busy and the operator's change to another integration
// applied 48-67 s late. Now the walk is bounded, the path is unresolvable
// (the watcher does not open it), one warning says so, and the operator's
// change applies at the next check.
func TestAnIntegrationsDeepLinkChainsDoNotDelayTheOperatorsChangeToAnother(t *testing.T) {
	defer func(d time.Duration) { reloadSettle = d }(reloadSettle)
	reloadSettle = time.Millisecond
	f := newReloadFixture(t)
	hostile := filepath.Join(f.root, "integrations", "hostile")
	os.MkdirAll(hostile, 0o755)
	os.WriteFile(filepath.Join(hostile, "manifest.json"), hostileManifest("1.0.0"), 0o644)
	second := "  - manifest: integrations/hostile\n    listen: 127.0.0.1:0\n"
	f.write(t, "", second)
	sv := startServe(t, "--config", f.cfg)
	audit := &lockedFile{path: f.audit}

	for _, name := range []string{"manifest.json", "voiceos.integration.json"} {
		deepLinkChain(t, hostile, name, hostileManifest("1.0.0"))
	}
	f.write(t, "    mode: audit\n", second) // the operator's change to com.test.weather, no SIGHUP
	waitFor(t, audit, `"integration":"com.test.weather",.*"exemption":"audit_mode","action":"exemption"`)
	if r := connectReason(t, sv.listen, "evil.example"); r == "not_allowlisted" {
		t.Fatal("the operator's change is not in force")
	}
	tooDeep := `resolves through more than 256 path components: egressd does not follow it`
	waitFor(t, &sv.stderr, tooDeep)
	f.write(t, "", second) // and back, a second reload with the chains in place
	waitFor(t, audit, `"exemption":"audit_mode","action":"exemption_withdrawn"`)
	if n := strings.Count(sv.stderr.String(), tooDeep); n != 1 {
		t.Errorf("the unresolvable manifest was reported %d times over two reloads, want once:\n%.3000s", n, sv.stderr.String())
	}
	sv.stop(t)
}

// deepLinkChain is the attacker's chain in dir (see the proxy package's
// test of the same name): a folder as deep as a path allows, 40 links in
// it each pointing absolutely to the next, the last to a real manifest,
// and name in dir swapped for a link to the first.
func deepLinkChain(t testing.TB, dir, name string, manifest []byte) {
	t.Helper()
	deep := filepath.Join(dir, ".d", strings.Repeat("a/", (3900-len(dir))/2))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(deep, "M"), manifest, 0o644)
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
}
