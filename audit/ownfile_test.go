package audit

import (
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
