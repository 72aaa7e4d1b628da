package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRun appends one run to path: genesis, the given denials, and a clean
// shutdown unless crash (the process was killed: no shutdown record).
func writeRun(t *testing.T, path string, crash bool, hosts ...string) {
	t.Helper()
	f, err := OpenFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := New(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if err := l.Write(Event{Kind: Connect, Decision: "deny", Reason: "not_allowed", Host: h}); err != nil {
			t.Fatal(err)
		}
	}
	if !crash {
		l.Close()
	}
}

// TestVerifyAfterACrashStillChecksEveryLaterRun is issue 13's B6: after one
// kill -9 of serve, verify reported the missing shutdown of run 1 and read
// no further, so every later run in the file could be edited freely. The
// crash is now a finding about run 1; run 2 is verified, and a line deleted
// from it is reported as run 2's break.
func TestVerifyAfterACrashStillChecksEveryLaterRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	writeRun(t, path, true, "x.example.com")
	writeRun(t, path, false, "y.example.com", "z.example.com")

	v, err := Verify([]string{path}, VerifyOptions{})
	if err != nil || v.Intact || len(v.Chains) != 2 || v.Chains[0].End != "crashed" || v.Chains[1].End != "shutdown" ||
		!strings.Contains(v.Problem, "ends at seq 2 without a clean-shutdown record") || v.Lines != 6 {
		t.Fatalf("untouched log: %+v %v", v, err)
	}

	data, _ := os.ReadFile(path)
	var kept []string
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if !strings.Contains(line, "y.example.com") {
			kept = append(kept, line)
		}
	}
	os.WriteFile(path, []byte(strings.Join(kept, "")), 0o600)
	v, err = Verify([]string{path}, VerifyOptions{})
	run2 := ""
	if len(v.Chains) == 2 {
		run2 = v.Chains[1].ID
	}
	if err != nil || v.Intact || run2 == "" || !strings.Contains(v.Problem, "seq 3: seq jumps from 1 to 3") || v.Chains[0].End != "crashed" || v.Chains[1].End != "broken" {
		t.Fatalf("a line deleted from run 2 (%s): %+v %v", run2, v, err)
	}
}
