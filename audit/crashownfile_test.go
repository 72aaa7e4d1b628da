package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ownRun writes one run to a new file of its own at path, as egressd run
// does; crash leaves it without its shutdown record (kill -9).
func ownRun(t *testing.T, path, runLink string, key []byte, crash bool, host string) {
	t.Helper()
	f, err := CreateFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := New(f, Options{Key: key, KeyID: "k1", RunLink: runLink})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(Event{Kind: Connect, Decision: "deny", Reason: "not_allowed", Host: host}); err != nil {
		t.Fatal(err)
	}
	if !crash {
		l.Close()
	}
}

// TestACrashedRunOfItsOwnFileDoesNotHideEditsInLaterRuns is the eleventh
// attacker's first break: after a kill -9'd egressd run and three clean
// runs, each in its own file, verify of the untouched files accused run 2
// of being copied into the crashed run's file (the crash was taken to end
// in the file where run 2 begins), and stopped there, so an edit to run 3
// was never named. The crash is a finding about run 1 alone; runs 2 to 4
// are verified, and an edit in run 3 is named.
func TestACrashedRunOfItsOwnFileDoesNotHideEditsInLaterRuns(t *testing.T) {
	dir := t.TempDir()
	key := []byte("0123456789abcdef0123456789abcdef")
	link := filepath.Join(dir, "x.lastrun")
	var files []string
	for i, host := range []string{"one.example", "two.example", "three.example", "four.example"} {
		path := filepath.Join(dir, "run"+string(rune('1'+i))+".log")
		ownRun(t, path, link, key, i == 0, host)
		files = append(files, path)
	}
	v, err := Verify(files, VerifyOptions{Key: key})
	if err != nil || v.Intact || len(v.Chains) != 4 || v.Chains[0].End != "crashed" ||
		!strings.Contains(v.Problem, "without a clean-shutdown record") || strings.Contains(v.Problem, "copied") {
		t.Fatalf("untouched files after a crash: %v %+v", err, v)
	}
	for _, c := range v.Chains[1:] {
		if c.End != "shutdown" || c.Problem != "" {
			t.Fatalf("a run after the crash is not verified intact: %+v", c)
		}
	}

	data, _ := os.ReadFile(files[2])
	os.WriteFile(files[2], []byte(strings.Replace(string(data), "three.example", "thre3.example", 1)), 0o600)
	v, err = Verify(files, VerifyOptions{Key: key})
	if err != nil || v.Intact || !strings.Contains(v.Problem, files[2]+": seq 2: the line's bytes do not match its hash") {
		t.Fatalf("an edit in run 3 after a crash is not named: %v %+v", err, v)
	}
}
