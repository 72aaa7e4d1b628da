package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
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
	out, errs, code = runBinary(t, "audit", "verify", "--key", oldKey, "--key", newKey, "--run-files", runFiles)
	if code != exitOK || !strings.Contains(out, "intact: ") || !strings.Contains(out, "3 chain(s)") {
		t.Fatalf("both keys: exit %d\n%s%s", code, out, errs)
	}
	// Round 51: each chain names the key that verified it, not only the
	// key id its first line claims (the writer's word).
	if strings.Count(out, "verified with --key #1 "+oldKey) != 2 || strings.Count(out, "verified with --key #2 "+newKey) != 1 {
		t.Fatalf("the chains do not name the key that verified each:\n%s", out)
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

// TestARetiredKeyCannotWriteOrPruneAfterTheChange is round 47's F1, F2 and
// F2b: with --key repeatable, the holder of the old key could add a run
// after the change (each chain took whichever key verified it), and sign
// a receipt that "pruned" runs written under the new key, which verify
// took, skipping their checkpoints; and an honest prune across the change
// signed its receipt with the old key, so the old key could never be
// retired. Keys are given oldest first and a run under an older key after
// a newer is refused; a receipt must be keyed with the key of the run
// kept after it, which is the key prune signs it with.
func TestARetiredKeyCannotWriteOrPruneAfterTheChange(t *testing.T) {
	state, dir := t.TempDir(), erpFolder(t, t.TempDir(), "com.acme.erp", "1.0.0", "erp.acme.example")
	oldKey := testKey(t)
	newKey := filepath.Join(t.TempDir(), "new.key")
	if err := os.WriteFile(newKey, []byte("fedcba9876543210fedcba9876543210"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := unsandboxedRuns(t, state, dir, oldKey, 1)
	runs := unsandboxedRuns(t, state, dir, newKey, 2)
	runFiles := filepath.Join(state, "audit", "com.acme.erp")

	// A receipt the old key's holder forges for the first run under the
	// new key, in the form prune writes.
	v, err := audit.Verify([]string{old[0], runs[0]}, audit.VerifyOptions{Key: readKey(t, oldKey), OtherKeys: [][]byte{readKey(t, newKey)}})
	if err != nil || !v.Intact {
		t.Fatalf("%v %+v", err, v)
	}
	forged := filepath.Join(t.TempDir(), "forged.log")
	f, err := audit.OpenFile(forged, 0)
	if err != nil {
		t.Fatal(err)
	}
	log, err := audit.New(f, audit.Options{Key: readKey(t, oldKey), Integration: v.OneIntegration()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range audit.PruneEvents(v.Chains[len(v.Chains)-1].Hash, v.Lines, v) {
		if err := log.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	log.Close()
	f.Close()
	// (Round 48: whatever run it is put before, one under the old key
	// included: a receipt under a key older than the newest given is
	// refused.)
	if out, errs, code := runBinary(t, "audit", "verify", "--key", oldKey, "--key", newKey, forged, runs[1]); code != exitFail || !strings.Contains(out, "older than the newest key given") {
		t.Fatalf("a receipt the old key signed for a run under the new: exit %d\n%s%s", code, out, errs)
	}

	// A run under the old key after the change.
	late := unsandboxedRuns(t, state, dir, oldKey, 1)
	if out, errs, code := runBinary(t, "audit", "verify", "--key", oldKey, "--key", newKey, "--run-files", runFiles); code != exitFail || !strings.Contains(out, "given before the key (#2) of a run before it") {
		t.Fatalf("a run under the old key after the change: exit %d\n%s%s", code, out, errs)
	}
	os.Remove(late[0])
	os.Remove(runFiles + ".lastrun") // the late run's link: the honest state before it is gone with it
	_ = late

	// An honest prune across the change keys its receipt with the new
	// key: afterwards the new key alone verifies.
	receipt := filepath.Join(t.TempDir(), "receipt.log")
	if out, errs, code := runBinary(t, "audit", "prune", "--key", oldKey, "--key", newKey, "--receipt", receipt, "--keep", runs[1], old[0], runs[0]); code != exitOK {
		t.Fatalf("prune: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := runBinary(t, "audit", "verify", "--key", newKey, receipt, runs[1]); code != exitOK {
		t.Fatalf("the new key alone after the prune: exit %d\n%s%s", code, out, errs)
	}
}

// readKey reads a key file as egressd reads one.
func readKey(t *testing.T, file string) []byte {
	t.Helper()
	key, err := readAuditKey(file)
	if err != nil {
		t.Fatal(err)
	}
	return key
}
