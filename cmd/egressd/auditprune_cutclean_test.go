package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
)

// overlapRun starts a keyed run in a file of its own, linked through link
// and checkpointed to journal, as egressd run does. done closes the run
// and lets go of its file, as the process's exit does.
func overlapRun(t *testing.T, dir, name, link string, key []byte, journal *bytes.Buffer) (l *audit.Log, path string, done func()) {
	t.Helper()
	path = filepath.Join(dir, name+".log")
	f, err := audit.CreateFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	l, err = audit.New(f, audit.Options{Key: key, KeyID: "k1", RunLink: link, Checkpoint: journal})
	if err != nil {
		t.Fatal(err)
	}
	return l, path, func() { l.Close(); f.Close() }
}

// TestACleanRunCutBackToPassAsACrashIsNotPrunedWithoutCheckpoints is round
// 18's t4: run X is running when run K starts (K names X only as open), X
// then makes a denied CONNECT and closes cleanly, L follows. Without the
// key, X's file is cut back at a line boundary before the deny: verify
// calls X crashed, and prune removed the "crashed" run, leaving a receipt
// and files that verified intact. Without checkpoints a cut is not told
// from a crash, so prune now refuses a run without its shutdown record
// unless checkpoints prove its end; with them, the cut run is refused
// too, and a run that really crashed is removed.
func TestACleanRunCutBackToPassAsACrashIsNotPrunedWithoutCheckpoints(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "audit.key")
	key := []byte("0123456789abcdef0123456789abcdef")
	os.WriteFile(keyFile, key, 0o600)
	link := filepath.Join(dir, "com.x.lastrun")
	var journal bytes.Buffer
	_, w0File, w0Done := overlapRun(t, dir, "w0", link, key, &journal)
	w0Done()
	x, xFile, xDone := overlapRun(t, dir, "x", link, key, &journal)
	_, kFile, kDone := overlapRun(t, dir, "k", link, key, &journal)
	kDone()
	x.Write(audit.Event{Kind: audit.Connect, Decision: "deny", Reason: "not_allowed", Host: "evil-a13.example.net", Port: 443})
	xDone()
	_, lFile, lDone := overlapRun(t, dir, "l", link, key, &journal)
	lDone()
	journalFile := filepath.Join(dir, "journal.txt")
	os.WriteFile(journalFile, journal.Bytes(), 0o600)

	lines := readLines(t, xFile)
	cut := -1
	for i, line := range lines {
		if strings.Contains(line, "evil-a13") {
			cut = i
		}
	}
	writeLines(t, xFile, lines[:cut])

	prune := func(extra ...string) (string, int) {
		receipt := filepath.Join(t.TempDir(), "receipt.log")
		args := append([]string{"audit", "prune", "--key", keyFile, "--receipt", receipt, "--keep", kFile}, extra...)
		_, errs, code := runCLI(t, append(args, w0File, xFile)...)
		return errs, code
	}
	if errs, code := prune(); code != 1 || !strings.Contains(errs, "no clean-shutdown record") || !strings.Contains(errs, "--checkpoints") {
		t.Fatalf("prune of a clean run cut back to pass as a crash, no checkpoints: exit %d\n%s", code, errs)
	}
	if errs, code := prune("--checkpoints", journalFile); code != 1 || !strings.Contains(errs, "cut back") {
		t.Fatalf("prune of a clean run cut back to pass as a crash, with checkpoints: exit %d\n%s", code, errs)
	}
	stillThere(t, w0File, xFile, kFile, lFile)
}
