package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportAfterTwoPrunesCountsEachRemovedRunOnce is issue 13 (f13o item
// 3): a second prune takes the first receipt with the next run, and its
// receipt listed the first receipt's own chain as a removed run, so the
// report's headline said 3 runs were removed where 2 were. Four runs,
// two prunes of one run each: the headline, the JSON and verify's note say
// exactly 2, and prune says how many runs it removed itself.
func TestReportAfterTwoPrunesCountsEachRemovedRunOnce(t *testing.T) {
	state, dir, key := t.TempDir(), erpFolder(t, t.TempDir(), "com.acme.erp", "1.0.0", "erp.acme.example"), testKey(t)
	runs := unsandboxedRuns(t, state, dir, key, 3)
	first, second := filepath.Join(t.TempDir(), "first.log"), filepath.Join(t.TempDir(), "second.log")
	if out, errs, code := runBinary(t, "audit", "prune", "--key", key, "--receipt", first, "--keep", runs[1], runs[0]); code != 0 || !strings.Contains(out, ": 1 run(s)") {
		t.Fatalf("first prune: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code := runBinary(t, "audit", "prune", "--key", key, "--receipt", second, "--keep", runs[2], first, runs[1])
	if code != 0 || !strings.Contains(out, ": 1 run(s)") || !strings.Contains(out, "2 run(s) removed in all") {
		t.Fatalf("second prune: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = runBinary(t, "audit", "report", "--key", key, "--format", "json", second, runs[2])
	var rep struct {
		Verification struct {
			Intact     bool `json:"intact"`
			PrunedRuns int  `json:"pruned_runs"`
		} `json:"verification"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || !rep.Verification.Intact || rep.Verification.PrunedRuns != 2 {
		t.Fatalf("report after two prunes of one run each: exit %d, %+v (%v)\n%s%s", code, rep.Verification, err, out, errs)
	}
	out, _, _ = runBinary(t, "audit", "report", "--key", key, second, runs[2])
	if !strings.Contains(out, "; 2 earlier run(s) were removed with egressd audit prune, 0 of them crashed") {
		t.Fatalf("report headline after two prunes:\n%s", out)
	}
	if out, errs, code := runBinary(t, "audit", "verify", "--key", key, second, runs[2]); code != 0 || !strings.Contains(out, "follows 2 run(s) the operator removed") {
		t.Fatalf("verify after two prunes: exit %d\n%s%s", code, out, errs)
	}
}
