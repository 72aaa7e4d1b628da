package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestARunAfterItsLinkFileWasGarbledIsNotVerifiedAsMerelyUnlinked is round
// 18's t1: without the key, run B's file is deleted and junk written to the
// link file before run C starts. C's genesis said prev_run=unknown, as an
// old egressd's does, and verify of A and C passed with a note. Now the
// genesis says the link file was unreadable, and verify fails unless
// checkpoints rule out a run removed before it.
func TestARunAfterItsLinkFileWasGarbledIsNotVerifiedAsMerelyUnlinked(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "com.x.lastrun")
	var journal bytes.Buffer
	start := func(name string) string {
		path := filepath.Join(dir, name+".log")
		f, err := CreateFile(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		l, err := New(f, Options{Key: testKey, KeyID: "k1", RunLink: link, Checkpoint: &journal})
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		return path
	}
	a, b := start("a"), start("b")
	os.Remove(b)
	os.WriteFile(link, []byte("junk\n"), 0o600)
	c := start("c")
	v := verifyFilesWithKey(t, a, c)
	if v.Intact || !strings.Contains(v.Problem, "the link file was missing or unreadable when run") {
		t.Fatalf("a run after a garbled link file, a run deleted before it: %+v", v)
	}
	// The journal holds B's checkpoints: given it, verify names B as
	// missing, the deletion the garbled link hid.
	records, err := ReadCheckpoints(&journal)
	if err != nil {
		t.Fatal(err)
	}
	v, err = Verify([]string{a, c}, VerifyOptions{Key: testKey, Checkpoints: records.Records})
	if err != nil {
		t.Fatal(err)
	}
	if v.Intact || !strings.Contains(v.Problem, "match no chain in the files given") {
		t.Fatalf("with the checkpoints: %+v", v)
	}
}

// TestARunAfterItsLinkFileWasDeletedIsNotVerifiedAsMerelyUnlinked is t1
// with the link file deleted instead of garbled: run C's genesis says
// prev_run=none (a first run) in a file of its own, yet run A comes before
// it in the files given. That was a note; an egressd run's own file after
// another run names it unless its link file was removed.
func TestARunAfterItsLinkFileWasDeletedIsNotVerifiedAsMerelyUnlinked(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "com.x.lastrun")
	start := func(name string) string {
		path := filepath.Join(dir, name+".log")
		f, err := CreateFile(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		l, err := New(f, Options{Key: testKey, KeyID: "k1", RunLink: link})
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		return path
	}
	a, b := start("a"), start("b")
	os.Remove(b)
	os.Remove(link)
	c := start("c")
	if v := verifyFilesWithKey(t, a, c); v.Intact || !strings.Contains(v.Problem, "the link file was missing or unreadable when run") {
		t.Fatalf("a run after a deleted link file, a run deleted before it: %+v", v)
	}
}
