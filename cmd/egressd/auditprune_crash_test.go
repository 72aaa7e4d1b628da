package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
)

// TestPruneOfACrashedRunNamesTheCrashNotACopy: after a kill -9'd egressd
// run, prune of its file with the next run's accused the next run of being
// copied into the crashed run's file. It refuses naming the crash, and
// removes nothing.
func TestPruneOfACrashedRunNamesTheCrashNotACopy(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "audit.key")
	key := []byte("0123456789abcdef0123456789abcdef")
	os.WriteFile(keyFile, key, 0o600)
	link := filepath.Join(dir, "x.lastrun")
	var files []string
	for i := 0; i < 3; i++ {
		path := filepath.Join(dir, "run"+string(rune('1'+i))+".log")
		f, err := audit.CreateFile(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		l, err := audit.New(f, audit.Options{Key: key, KeyID: "k1", RunLink: link})
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 { // run 1 is killed: no shutdown record
			l.Close()
		}
		f.Close()
		files = append(files, path)
	}
	out, errs, code := runCLI(t, "audit", "prune", "--key", keyFile, "--receipt", filepath.Join(dir, "r.log"), "--keep", files[2], files[0], files[1])
	if _, err := os.Stat(files[0]); code != 1 || err != nil || !strings.Contains(errs, "without a clean-shutdown record") || strings.Contains(errs, "copied") {
		t.Fatalf("prune of a crashed run: exit %d (file gone: %v)\n%s%s", code, err != nil, out, errs)
	}
}
