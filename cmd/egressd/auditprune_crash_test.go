package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
)

// TestPruneOfACrashedRunNamesTheCrashNotACopy: after a kill -9'd egressd
// run, prune of its file with the next run's accused the next run of being
// copied into the crashed run's file. Then it refused the crash for ever
// (issue 13); now, no process holding the file, it prunes it, names the
// crash, and the receipt keeps it for verify.
func TestPruneOfACrashedRunNamesTheCrashNotACopy(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "audit.key")
	key := []byte("0123456789abcdef0123456789abcdef")
	os.WriteFile(keyFile, key, 0o600)
	link := filepath.Join(dir, "x.lastrun")
	var journal bytes.Buffer
	var files []string
	for i := 0; i < 3; i++ {
		path := filepath.Join(dir, "run"+string(rune('1'+i))+".log")
		f, err := audit.CreateFile(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		l, err := audit.New(f, audit.Options{Key: key, KeyID: "k1", RunLink: link, Checkpoint: &journal})
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 { // run 1 is killed: no shutdown record
			l.Close()
		}
		f.Close()
		files = append(files, path)
	}
	receipt := filepath.Join(dir, "r.log")
	// Without checkpoints the crash is not told from a clean run cut back.
	if _, errs, code := runCLI(t, "audit", "prune", "--key", keyFile, "--receipt", receipt, "--keep", files[2], files[0], files[1]); code != 1 || !strings.Contains(errs, "pass --checkpoints") {
		t.Fatalf("prune of a crashed run without checkpoints: exit %d\n%s", code, errs)
	}
	ckpt := filepath.Join(dir, "journal.txt")
	os.WriteFile(ckpt, journal.Bytes(), 0o600)
	out, errs, code := runCLI(t, "audit", "prune", "--key", keyFile, "--checkpoints", ckpt, "--receipt", receipt, "--keep", files[2], files[0], files[1])
	if _, err := os.Stat(files[0]); code != 0 || err == nil || !strings.Contains(out, "(crashed at seq 1: the receipt records it)") || strings.Contains(out+errs, "copied") {
		t.Fatalf("prune of a crashed run: exit %d (file still there: %v)\n%s%s", code, err == nil, out, errs)
	}
	if out, code := verify(t, "--key", keyFile, receipt, files[2]); code != 0 || !strings.Contains(out, "crashed at seq 1; pruned by receipt") || strings.Contains(out, "every chain was closed cleanly") {
		t.Fatalf("verify with the receipt: exit %d\n%s", code, out)
	}
	// The report's headline names the runs removed and the crash.
	if out, errs, code := runCLI(t, "audit", "report", "--key", keyFile, receipt, files[2]); code != 0 || !strings.Contains(out, "2 earlier run(s) were removed with egressd audit prune, 1 of them crashed") {
		t.Fatalf("report with the receipt: exit %d\n%s%s", code, out, errs)
	}
}

// TestACrashedRunCutBackBeforePruneFailsVerifyByItsCheckpoints: a crashed
// run's end has no link after it (the next run names the run, not its
// end), so lines cut off its end before prune look like an earlier crash.
// Prune given the run's checkpoints refuses it, and without checkpoints it
// refuses every run with no shutdown record; given a journal that lost
// the later checkpoints, the receipt records the seq it ended at, and
// verify with the whole journal names the cut.
func TestACrashedRunCutBackBeforePruneFailsVerifyByItsCheckpoints(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "audit.key")
	key := []byte("0123456789abcdef0123456789abcdef")
	os.WriteFile(keyFile, key, 0o600)
	link := filepath.Join(dir, "x.lastrun")
	var journal bytes.Buffer
	var files []string
	for i := 0; i < 3; i++ {
		path := filepath.Join(dir, "run"+string(rune('1'+i))+".log")
		f, err := audit.CreateFile(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		l, err := audit.New(f, audit.Options{Key: key, KeyID: "k1", RunLink: link, Checkpoint: &journal, CheckpointEvery: 2})
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 4; j++ {
			l.Write(audit.Event{Kind: audit.Lifecycle, Action: "note", Msg: "work"})
		}
		if i > 0 { // run 1 is killed: no shutdown record
			l.Close()
		}
		f.Close()
		files = append(files, path)
	}
	lines := readLines(t, files[0])
	writeLines(t, files[0], lines[:len(lines)-2]) // its last two lines cut off
	ckpt := filepath.Join(dir, "journal")
	os.WriteFile(ckpt, journal.Bytes(), 0o600)

	receipt := filepath.Join(dir, "r.log")
	// Given the checkpoints, prune refuses the cut run.
	if _, errs, code := runCLI(t, "audit", "prune", "--key", keyFile, "--checkpoints", ckpt, "--receipt", receipt, "--keep", files[2], files[0], files[1]); code != 1 || !strings.Contains(errs, "the log was cut back") {
		t.Fatalf("prune --checkpoints of a crashed run cut back: exit %d\n%s", code, errs)
	}
	stillThere(t, files...)
	// Without them prune refuses: the cut reads as a crash.
	if _, errs, code := runCLI(t, "audit", "prune", "--key", keyFile, "--receipt", receipt, "--keep", files[2], files[0], files[1]); code != 1 || !strings.Contains(errs, "pass --checkpoints") {
		t.Fatalf("prune of a crashed run cut back, no checkpoints: exit %d\n%s", code, errs)
	}
	// Given only the genesis checkpoints (a journal that lost the rest),
	// the receipt's last seq is what verify holds the full journal to.
	var partial []string
	for _, line := range strings.SplitAfter(journal.String(), "\n") {
		if strings.Contains(line, `"seq":1,`) {
			partial = append(partial, line)
		}
	}
	partialFile := filepath.Join(dir, "partial")
	os.WriteFile(partialFile, []byte(strings.Join(partial, "")), 0o600)
	if out, errs, code := runCLI(t, "audit", "prune", "--key", keyFile, "--checkpoints", partialFile, "--receipt", receipt, "--keep", files[2], files[0], files[1]); code != 0 {
		t.Fatalf("prune: exit %d\n%s%s", code, out, errs)
	}
	if out, code := verify(t, "--key", keyFile, "--checkpoints", ckpt, receipt, files[2]); code != 1 || !strings.Contains(out, "the run was cut back before it was pruned") {
		t.Fatalf("verify with the checkpoints of a crashed run cut back before prune: exit %d\n%s", code, out)
	}
}

// TestAFileRenamedOverAPrunedOneWhileHeldIsNotRemoved: prune removes files
// by name after verifying them. A file renamed over one of them in
// between (here: a copy of the kept run's file, which the attacker then
// deletes) would be removed in its place. Prune checks that each name
// still names the file it holds, refuses, and removes nothing.
func TestAFileRenamedOverAPrunedOneWhileHeldIsNotRemoved(t *testing.T) {
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
		l.Close()
		f.Close()
		files = append(files, path)
	}
	pruneVerified = func([]string) {
		if err := os.Rename(writeTemp(t, strings.Join(readLines(t, files[2]), "\n")+"\n"), files[1]); err != nil {
			t.Error(err)
		}
	}
	defer func() { pruneVerified = func([]string) {} }()
	receipt := filepath.Join(dir, "r.log")
	_, errs, code := runCLI(t, "audit", "prune", "--key", keyFile, "--receipt", receipt, "--keep", files[2], files[0], files[1])
	if code != 1 || !strings.Contains(errs, files[1]+" was replaced while it was held") {
		t.Fatalf("prune with a file renamed over one it verified: exit %d\n%s", code, errs)
	}
	stillThere(t, files...)
	if _, err := os.Stat(receipt); err == nil {
		t.Fatal("a refused prune wrote its receipt")
	}
}
