package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeWarnsOfAWaitingWideningOnceNotAtEveryReload: serve printed the
// same widening warning at every reload that found it still waiting (the
// manifest watcher's and the operator's SIGHUP), so the journal showed
// each warning twice. It is printed when it first waits, and again only
// when what waits changes; the audit log still records every reload.
func TestServeWarnsOfAWaitingWideningOnceNotAtEveryReload(t *testing.T) {
	dir := t.TempDir()
	integ := filepath.Join(dir, "weather")
	os.Mkdir(integ, 0o755)
	manifest := filepath.Join(integ, "manifest.json")
	os.WriteFile(manifest, weatherManifest("1.0.0", `"api.weather.example"`), 0o644)
	auditFile := filepath.Join(dir, "audit.log")
	sv := startServe(t, "--manifest", integ, "--listen", "127.0.0.1:0", "--state", t.TempDir(), "--resolver", "127.0.0.1:9", "--audit-log", auditFile)
	os.WriteFile(manifest, weatherManifest("1.1.0", `"api.weather.example","new.weather.example"`), 0o644)
	audit := &lockedFile{path: auditFile}
	for want := 1; want <= 2; want++ {
		sv.sig <- syscall.SIGHUP
		// The warning is written before the reload's audit line: once the
		// want-th pending line is there, every warning of those reloads is too.
		waitFor(t, audit, `(?s)(?:"action":"pending".*){`+string(rune('0'+want))+`}`)
	}
	if n := strings.Count(sv.stderr.String(), "adds new.weather.example to its network list"); n != 1 {
		t.Fatalf("the widening warning was printed %d times:\n%s", n, sv.stderr.String())
	}
	sv.stop(t)
}
