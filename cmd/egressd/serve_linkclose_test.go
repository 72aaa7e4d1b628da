package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeWhoseStdoutLinkFileCannotBeUpdatedAtStopSaysSoAndExitsNonZero:
// with its audit log on stdout, serve records its last hash in
// STATE/audit-stdout.link at stop, for the next run's genesis. That
// write's error was dropped (Daemon.Shutdown ignored the log's Close
// error): serve exited 0 and no one learned the link still said the run
// was open. Here the state folder is made immutable while serve runs.
func TestServeWhoseStdoutLinkFileCannotBeUpdatedAtStopSaysSoAndExitsNonZero(t *testing.T) {
	dir := t.TempDir()
	cfg := serveDir(t, dir, "")
	body, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(body), "path: "+filepath.Join(dir, "audit.log"), `path: "-"`, 1)), 0o600)
	out, err := os.Create(filepath.Join(dir, "captured.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	sp := startServeProcessTo(t, cfg, out)
	state := filepath.Join(dir, "state")
	t.Cleanup(func() { setImmutable(t, state, false) }) // before t.TempDir removes it
	if err := setImmutable(t, state, true); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chattr +i on %s: %v", state, err)
		}
		t.Skipf("chattr +i on %s: %v", state, err)
	}
	sp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-sp.done:
		if err == nil || !strings.Contains(sp.stderr.String(), "audit-stdout.link was not updated") {
			t.Fatalf("serve exited %v:\n%s", err, sp.stderr.String())
		}
	case <-time.After(30 * time.Second): // bounds a failure only
		t.Fatal("serve did not stop on SIGTERM")
	}
}
