package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunsWrittenAcrossAChangeOfKeyVerifyWithBothKeys is round 45's F1:
// after the audit key changed, the honest runs of one id verified with
// neither key ("the line was edited", which none was), could not be split
// by key (the first run under the new key names the last under the old),
// and could never be pruned. --key is repeatable: each chain is checked
// with the key its genesis verifies with, and keeps it.
func TestRunsWrittenAcrossAChangeOfKeyVerifyWithBothKeys(t *testing.T) {
	state, dir := t.TempDir(), erpFolder(t, t.TempDir(), "com.acme.erp", "1.0.0", "erp.acme.example")
	oldKey := testKey(t)
	newKey := filepath.Join(t.TempDir(), "new.key")
	if err := os.WriteFile(newKey, []byte("fedcba9876543210fedcba9876543210"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := append(unsandboxedRuns(t, state, dir, oldKey, 2), unsandboxedRuns(t, state, dir, newKey, 1)...)
	runFiles := filepath.Join(state, "audit", "com.acme.erp")

	out, errs, code := runBinary(t, "audit", "verify", "--key", newKey, "--run-files", runFiles)
	if code != exitFail || !strings.Contains(out, "was keyed with another key; give every key the files were written with") {
		t.Fatalf("the new key alone: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := runBinary(t, "audit", "verify", "--key", oldKey, "--key", newKey, "--run-files", runFiles); code != exitOK || !strings.Contains(out, "intact: ") || !strings.Contains(out, "3 chain(s)") {
		t.Fatalf("both keys: exit %d\n%s%s", code, out, errs)
	}
	// An edit under either key is still found.
	data, _ := os.ReadFile(files[1])
	writeFile(t, files[1], strings.Replace(string(data), `"com.acme.erp"`, `"com.acme.erq"`, 1))
	if out, errs, code := runBinary(t, "audit", "verify", "--key", oldKey, "--key", newKey, "--run-files", runFiles); code != exitFail || !strings.Contains(out, "BROKEN") {
		t.Fatalf("an edit in the second run: exit %d\n%s%s", code, out, errs)
	}
	writeFile(t, files[1], string(data))

	// The runs under the old key are pruned, the run under the new kept.
	receipt := filepath.Join(t.TempDir(), "receipt.log")
	if out, errs, code := runBinary(t, "audit", "prune", "--key", oldKey, "--key", newKey, "--receipt", receipt, "--keep", files[2], files[0], files[1]); code != exitOK {
		t.Fatalf("prune across the change: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := runBinary(t, "audit", "verify", "--key", oldKey, "--key", newKey, receipt, "--run-files", runFiles); code != exitOK {
		t.Fatalf("the receipt and the run kept: exit %d\n%s%s", code, out, errs)
	}
}
