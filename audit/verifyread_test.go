package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTestLog writes a log of n refusals to a file and closes it cleanly.
func writeTestLog(t *testing.T, n int) string {
	path := filepath.Join(t.TempDir(), "audit.log")
	f, err := OpenFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := New(f, Options{})
	for i := range n {
		l.Write(Event{Kind: Connect, Integration: "com.test.weather", Decision: "deny", Reason: "not_allowlisted", Host: "h" + itoa(int64(i)) + ".evil.example"})
	}
	l.Close()
	f.Close()
	return path
}

// TestVerifyAndReadReportsTheBytesItVerified (issue 18, f18b break 3):
// the records come from the same pass that verified them: on an intact log
// they are every line; on a log with a line deleted the verdict is broken
// and every remaining line is still read for the report that says so.
func TestVerifyAndReadReportsTheBytesItVerified(t *testing.T) {
	path := writeTestLog(t, 5)
	v, recs, err := VerifyAndRead([]string{path}, VerifyOptions{})
	want, _ := ReadFiles([]string{path})
	if err != nil || !v.Intact || len(recs) != len(want) || len(recs) != v.Lines {
		t.Fatalf("intact log: %+v, %d records (%d lines), %v", v, len(recs), len(want), err)
	}
	data, _ := os.ReadFile(path)
	var kept []string
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if !strings.Contains(l, "h2.evil.example") {
			kept = append(kept, l)
		}
	}
	os.WriteFile(path, []byte(strings.Join(kept, "")), 0o600)
	v, recs, err = VerifyAndRead([]string{path}, VerifyOptions{})
	if err != nil || v.Intact || !strings.Contains(v.Problem, "deleted") || len(recs) != len(want)-1 {
		t.Fatalf("a line deleted: %+v, %d records, %v", v, len(recs), err)
	}
	for _, r := range recs {
		if r.Host == "h2.evil.example" {
			t.Fatal("a record not in the file")
		}
	}
}
