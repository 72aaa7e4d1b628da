package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServeOnANewStateFolderWarnsThatEveryIntegrationLoadsAsFirstSeen is
// f13g item 5: a state_dir with a typo (or a wiped disk) made every
// manifest a first load, with any list and no gate, and nothing said so.
// serve now warns once at start, on stderr and in the audit log, naming
// the state file; a start over the version memory it wrote says nothing.
func TestServeOnANewStateFolderWarnsThatEveryIntegrationLoadsAsFirstSeen(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"manifest_version":1,"id":"com.test.weather","version":"1.0.0","network":{"connect":["api.weather.example"]}}`), 0o600)
	state := filepath.Join(dir, "stat") // the operator meant "state"
	auditFile := filepath.Join(dir, "audit.log")
	cfg := filepath.Join(dir, "egressd.yaml")
	os.WriteFile(cfg, []byte("state_dir: "+state+"\nresolvers: [\"127.0.0.1:9\"]\naudit:\n  path: "+auditFile+"\nintegrations:\n  - manifest: .\n    listen: 127.0.0.1:0\n"), 0o600)
	start := func() string {
		var out, errb lockedBuffer
		sig := make(chan os.Signal, 1)
		done := make(chan int, 1)
		go func() { done <- serve(context.Background(), []string{"--config", cfg}, &out, &errb, sig) }()
		waitFor(t, &errb, `serving com.test.weather on (127\.0\.0\.1:\d+)`)
		sig <- syscall.SIGTERM
		if code := <-done; code != 0 {
			t.Fatalf("serve exit %d: %s", code, errb.String())
		}
		return errb.String()
	}
	want := "egressd: warning: version memory at " + filepath.Join(state, "versions.json") + " is new (no versions.json yet): every integration loads as first seen"
	if errs := start(); strings.Count(errs, "version memory at") != 1 || !strings.Contains(errs, want) {
		t.Fatalf("first start on a new state folder:\n%s", errs)
	}
	if log, _ := os.ReadFile(auditFile); strings.Count(string(log), `"action":"version_memory_new"`) != 1 {
		t.Fatalf("the audit log does not record the new version memory once:\n%s", log)
	}
	if errs := start(); strings.Contains(errs, "version memory at") {
		t.Fatalf("a start over existing version memory warns:\n%s", errs)
	}
}

// TestRunOnANewStateFolderWarnsThatItLoadsAsFirstSeen is item 5 for
// egressd run: the first run over a new --state says so, on stderr and in
// its audit log; the next run does not.
func TestRunOnANewStateFolderWarnsThatItLoadsAsFirstSeen(t *testing.T) {
	e := newSandboxEnv(t)
	_, errs, code := e.run("true")
	if code != 0 || !strings.Contains(errs, "egressd: warning: version memory at "+filepath.Join(e.state, "versions.json")+" is new") || !strings.Contains(e.auditLog(), `"action":"version_memory_new"`) {
		t.Fatalf("first run: exit %d\n%s\n%s", code, errs, e.auditLog())
	}
	if _, errs, code = e.run("true"); code != 0 || strings.Contains(errs, "version memory at") {
		t.Fatalf("second run: exit %d\n%s", code, errs)
	}
}
