package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// oneRun writes one closed chain to a new file at path, as egressd run does
// when runLink is set (a file of its own), or as a writer given a path.
func oneRun(t *testing.T, path, runLink string) string {
	t.Helper()
	f, err := CreateFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(f, Options{RunLink: runLink})
	if err != nil {
		t.Fatal(err)
	}
	l.Write(Event{Kind: Lifecycle, Action: "start"})
	l.Close()
	f.Close()
	data, _ := os.ReadFile(path)
	return regexp.MustCompile(`chain=([0-9a-f]+)`).FindStringSubmatch(string(data))[1]
}

// TestARunOfItsOwnFileCopiedAfterAnotherRunInAFileIsCaught: a run that
// claims its file alone, copied to the end of a file of another writer's
// runs (one that makes no such claim), is a splice; and a chain that
// begins twice is a copy. Both are named.
func TestARunOfItsOwnFileCopiedAfterAnotherRunInAFileIsCaught(t *testing.T) {
	dir := t.TempDir()
	shared, own := filepath.Join(dir, "shared.log"), filepath.Join(dir, "run.log")
	oneRun(t, shared, "")
	id := oneRun(t, own, filepath.Join(dir, "x.lastrun"))
	if data, _ := os.ReadFile(own); !strings.Contains(string(data), " file=own") {
		t.Fatalf("a run's own file does not say so:\n%s", data)
	}
	data, _ := os.ReadFile(own)
	copyAt := filepath.Join(dir, "copy.log")
	os.WriteFile(copyAt, data, 0o600)
	f, _ := os.OpenFile(shared, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(data)
	f.Close()
	if v, err := Verify([]string{shared}, VerifyOptions{}); err != nil || v.Intact || !strings.Contains(v.Problem, "chain "+id+" was written to a file of its own") {
		t.Fatalf("own run appended after another writer's run: %v %+v", err, v)
	}
	if v, err := Verify([]string{own, copyAt}, VerifyOptions{}); err != nil || v.Intact || !strings.Contains(v.Problem, "chain "+id+" begins again") {
		t.Fatalf("a run and its copy: %v %+v", err, v)
	}
	if _, err := CreateFile(own, 0); err == nil {
		t.Fatal("CreateFile opened a file that exists")
	}
}

// TestAKeptRunThatDoesNotNameTheRunBeforeItIsNotTakenAsFollowingThePrunedOnes:
// prune's kept file must prove, with the key, that its run follows the
// last run pruned; a genesis with prev_run=unknown (a run that started
// while another ran, or after a crash) proves nothing, and is refused.
func TestAKeptRunThatDoesNotNameTheRunBeforeItIsNotTakenAsFollowingThePrunedOnes(t *testing.T) {
	dir := t.TempDir()
	key := []byte("0123456789abcdef0123456789abcdef")
	link := filepath.Join(dir, "x.lastrun")
	var journal bytes.Buffer
	write := func(name string) string {
		path := filepath.Join(dir, name)
		f, err := CreateFile(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		l, err := New(f, Options{Key: key, KeyID: "k1", RunLink: link, Checkpoint: &journal})
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		f.Close()
		return path
	}
	first := write("1.log")
	os.WriteFile(link, []byte("garbage\n"), 0o600) // the next run cannot name the run before it
	kept := write("2.log")
	v, err := Verify([]string{first}, VerifyOptions{Key: key, Keep: kept})
	if err != nil || v.Intact || !strings.Contains(v.Problem, "does not name the run before it (prev_run unreadable)") {
		t.Fatalf("kept run with prev_run=unreadable: %v %+v", err, v)
	}
	third := write("3.log")
	// The checkpoints rule out a run removed before the one that started
	// after the garbled link (see TestARunAfterItsLinkFileWasGarbled...).
	records, _ := ReadCheckpoints(bytes.NewReader(journal.Bytes()))
	if v, err := Verify([]string{first, kept}, VerifyOptions{Key: key, Keep: third, Checkpoints: records.Records}); err != nil || !v.Intact {
		t.Fatalf("kept run that follows: %v %+v", err, v)
	}
}
