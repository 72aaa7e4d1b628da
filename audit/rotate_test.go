package audit

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// TestSizeRotationKeepsOneVerifiableChain writes past a small size limit,
// rolls the file the way egressd serve does once a second, and verifies the
// chain across the rolled files and the current one.
func TestSizeRotationKeepsOneVerifiableChain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	f, err := OpenFile(path, 4096)
	if err != nil {
		t.Fatal(err)
	}
	log, err := New(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		if err := log.Write(Event{Kind: Connect, Decision: "deny", Reason: "not_allowlisted", Host: strings.Repeat("x", 40) + ".example"}); err != nil {
			t.Fatal(err)
		}
		if err := log.RollIfFull(); err != nil {
			t.Fatal(err)
		}
	}
	log.Close()
	rolled, _ := filepath.Glob(path + ".*")
	if len(rolled) < 3 {
		t.Fatalf("only %d rolled files", len(rolled))
	}
	sort.Strings(rolled) // the timestamped names sort in time order
	files := append(rolled, path)
	v, err := Verify(files, VerifyOptions{})
	if err != nil || !v.Intact || v.Lines < 200 {
		t.Fatalf("verify across %d files: %+v %v", len(files), v, err)
	}
	// A second writer on the same file is refused, not interleaved.
	if _, err := OpenFile(path, 0); err == nil || !strings.Contains(err.Error(), "in use by another egressd process") {
		t.Fatalf("second writer: %v", err)
	}
	// The log holds the locked file: unreferenced, the collector would
	// close it and drop the lock before the check above.
	runtime.KeepAlive(log)
	os.Remove(rolled[1])
	if v, _ := Verify(append([]string{rolled[0]}, append(rolled[2:], path)...), VerifyOptions{}); v.Intact {
		t.Fatal("a deleted middle file went unnoticed")
	}
}
