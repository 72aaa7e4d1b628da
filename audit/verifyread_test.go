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

// TestCheckpointAtTheEndOfALineLongerThanTheReadersBufferIsFound is round
// 9's b1 at the reader: a program's unterminated stderr put egressd's
// checkpoint at the end of a 70,000-byte line, which the reader skipped
// whole. The checkpoint at the end of a long line is found (the last one
// in the line, egressd's, after a fake the program wrote), and a long line
// that names a checkpoint without ending in one (the mention split across
// the reader's chunks) is counted unread, never skipped.
func TestCheckpointAtTheEndOfALineLongerThanTheReadersBufferIsFound(t *testing.T) {
	h := strings.Repeat("b", 64)
	fake := `{"event":"checkpoint","chain":"fake"`
	journal := strings.Repeat("A", 70000) + fake + `{"event":"checkpoint","chain":"c","seq":8,"hash":"` + h + `"}` + "\n" +
		strings.Repeat("B", 64<<10-16) + `{"event":"checkpoint","chain":"c","seq":9}` + strings.Repeat("C", 10000) + "\n" +
		strings.Repeat("D", 300000) + "\n" +
		strings.Repeat("E", 200000) + `{"event":"checkpoint","chain":"c","seq":10,"hash":"` + h + `"}`
	got, err := ReadCheckpoints(strings.NewReader(journal))
	if err != nil || len(got.Records) != 2 || got.Records[0].Seq != 8 || got.Records[1].Seq != 10 || len(got.Unread) != 1 || got.Unread[0] != 2 {
		t.Fatalf("%+v %v", got, err)
	}
}
