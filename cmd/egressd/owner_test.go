package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeWarnsOnceAboutAManifestItsIntegrationOwnsUntilItsWritersChange:
// the check read only the group and other write bits, and only at start,
// so a manifest owned by the integration's own uid (mode 0644: it can
// chmod and write it) got no warning. Now the owner counts (when it is
// neither root nor egressd's own user) and every folder above the manifest
// is checked; the warning is one line per manifest (the first writer and
// how many more), written again only when who can write it changes. It
// was a line per folder on every reload: the round-6 attacker's
// s5_warning_flood.sh linked its manifest to a file ~1,900 folders deep in
// its own folder and rewrote it every 0.3 s, 40,000 audit lines and 90 MB
// of stderr in 20 s, until the audit disk was full and every integration
// got 503 audit_unavailable. Here: a file 200 folders deep, 20 rewrites,
// each a reload.
func TestServeWarnsOnceAboutAManifestItsIntegrationOwnsUntilItsWritersChange(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("chown needs root in CI")
		}
		t.Skip("chown needs root")
	}
	defer func(d time.Duration) { reloadSettle = d }(reloadSettle)
	reloadSettle = time.Millisecond
	dir := t.TempDir()
	integ := filepath.Join(dir, "weather")
	os.Mkdir(integ, 0o755)
	manifest := filepath.Join(integ, "manifest.json")
	os.WriteFile(manifest, weatherManifest("1.0.0", `"api.weather.example"`), 0o644)
	const appUID, otherUID = 4242, 4343
	if err := os.Chown(manifest, appUID, appUID); err != nil {
		t.Fatal(err)
	}
	os.Chown(dir, otherUID, 0) // a folder above the manifest, owned by someone else
	auditFile := filepath.Join(t.TempDir(), "audit.log")
	sv := startServe(t, "--manifest", integ, "--listen", "127.0.0.1:0", "--state", t.TempDir(), "--resolver", "127.0.0.1:9", "--audit-log", auditFile)
	audit := &lockedFile{path: auditFile}
	waitFor(t, &sv.stderr, `warning: `+regexp.QuoteMeta(manifest)+` can be changed by its owner, uid 4242 \(mode -rw-r--r--, owner 4242, group 4242\), and 1 more files or folders on its path can be changed by others: whoever can write them can change com.test.weather's allowlist at the next reload`)
	if strings.Contains(sv.stderr.String(), integ+" can be changed") {
		t.Fatalf("a root-owned 0755 folder was reported:\n%s", sv.stderr.String())
	}

	// The integration (uid 4242) links its manifest to a file deep in its
	// own folder, then keeps rewriting that file.
	deep := filepath.Join(integ, ".d", strings.Repeat("a/", 200))
	os.MkdirAll(deep, 0o755)
	filepath.Walk(filepath.Join(integ, ".d"), func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, appUID, appUID) })
	target := filepath.Join(deep, "m")
	os.WriteFile(target, []byte("0"), 0o644)
	os.Chown(target, appUID, appUID)
	os.Symlink(target, filepath.Join(integ, ".new"))
	os.Rename(filepath.Join(integ, ".new"), manifest)
	reloads := func(n int) {
		t.Helper()
		waitFor(t, audit, `(?s)`+strings.Repeat(`"action":"kept_last_good".*`, n))
	}
	reloads(1)
	for i := range 20 {
		os.WriteFile(target, []byte(strconv.Itoa(i+1)), 0o644)
		reloads(i + 2)
	}
	sv.sig <- syscall.SIGHUP
	reloads(22)
	lines := strings.Count(audit.String(), `"action":"writable_manifest"`)
	warnings := strings.Count(sv.stderr.String(), "whoever can write")
	if lines != 2 || warnings != 2 {
		t.Fatalf("22 reloads wrote %d writable_manifest audit lines and %d warnings; want 2 each (start, and the link's new writers)", lines, warnings)
	}
	// The deep path is shortened: its start, its length, its end.
	waitFor(t, &sv.stderr, `warning: `+regexp.QuoteMeta(dir)+`/weather/\.d/.*…\(\d+ bytes\)….*/a/m can be changed by its owner, uid 4242 .*, and 20\d more files or folders on its path`)

	os.Chown(dir, 0, 0) // who can write it changes: one more line
	os.WriteFile(target, []byte("last"), 0o644)
	waitFor(t, audit, `(?s)"action":"writable_manifest".*"action":"writable_manifest".*"action":"writable_manifest"`)
	sv.stop(t)
}
