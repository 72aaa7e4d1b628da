package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestServeWarnsAtEveryReloadAboutAManifestItsIntegrationOwns: the check
// read only the group and other write bits, and only at start, so a
// manifest owned by the integration's own uid (mode 0644: it can chmod and
// write it) got no warning. Now the owner counts (when it is neither root
// nor egressd's own user), every folder above the manifest is checked, and
// the warning comes at start and on every reload.
func TestServeWarnsAtEveryReloadAboutAManifestItsIntegrationOwns(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("chown needs root in CI")
		}
		t.Skip("chown needs root")
	}
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
	fileWarning := `warning: ` + regexp.QuoteMeta(manifest) + ` can be changed by its owner, uid 4242 \(mode -rw-r--r--, owner 4242, group 4242\): whoever can write it can change com.test.weather's allowlist`
	dirWarning := `warning: ` + regexp.QuoteMeta(dir) + ` can be changed by its owner, uid 4343`
	waitFor(t, &sv.stderr, fileWarning)
	waitFor(t, &sv.stderr, dirWarning)
	sv.sig <- syscall.SIGHUP
	waitFor(t, &sv.stderr, `(?s)`+fileWarning+`.*`+fileWarning)
	waitFor(t, &lockedFile{path: auditFile}, `(?s)"action":"writable_manifest".*"action":"writable_manifest".*"action":"writable_manifest".*"action":"writable_manifest"`)
	if strings.Contains(sv.stderr.String(), integ+" can be changed") {
		t.Fatalf("a root-owned 0755 folder was reported:\n%s", sv.stderr.String())
	}
	sv.stop(t)
}
