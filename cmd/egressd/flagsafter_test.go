package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// unsandboxedRuns runs egressd run --insecure-env-only n times on dir with
// a keyed log in the default per-run files (STATE/audit/ID.PID.log), the
// flags after the folder, and returns the files in run order.
func unsandboxedRuns(t *testing.T, state, dir, key string, n int) []string {
	t.Helper()
	var files []string
	for i := 0; i < n; i++ {
		_, errs, code := runBinary(t, "run", dir, "--insecure-env-only", "--state", state, "--audit-key", key, "--", "true")
		m := regexp.MustCompile(`egressd run: audit log (\S+)`).FindStringSubmatch(errs)
		if code != 0 || m == nil {
			t.Fatalf("egressd run DIR --flags -- true: exit %d\n%s", code, errs)
		}
		files = append(files, m[1])
	}
	return files
}

// testKey writes an audit key file and returns its path.
func testKey(t *testing.T) string {
	t.Helper()
	key := filepath.Join(t.TempDir(), "audit.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	return key
}

// TestEveryCommandTakesItsFlagsAfterItsArguments is issue 13 (f13o item
// 1): "egressd audit verify RECEIPT --run-files DIR" read --run-files and
// DIR as two more files to verify (Go's flag package stops at the first
// positional argument), and explain, audit report, audit prune and run
// likewise. Through the built binary, each command takes its flags after
// its positional arguments, and "--" ends them.
func TestEveryCommandTakesItsFlagsAfterItsArguments(t *testing.T) {
	state, dir, key := t.TempDir(), erpFolder(t, t.TempDir(), "com.acme.erp", "1.0.0", "erp.acme.example"), testKey(t)
	files := unsandboxedRuns(t, state, dir, key, 3)
	if _, errs, code := runBinary(t, "run", dir, "--manifest", dir, "--insecure-env-only", "--state", state, "--", "true"); code != exitUsage || !strings.Contains(errs, "not both") {
		t.Fatalf("egressd run DIR --manifest DIR: exit %d\n%s", code, errs)
	}
	receipt := filepath.Join(t.TempDir(), "receipt.log")
	if out, errs, code := runBinary(t, "audit", "prune", files[0], "--key", key, "--receipt", receipt, "--keep", files[1]); code != 0 {
		t.Fatalf("audit prune FILE --flags: exit %d\n%s%s", code, out, errs)
	}
	runFiles := filepath.Join(state, "audit", "com.acme.erp")
	if out, errs, code := runBinary(t, "audit", "verify", receipt, "--key", key, "--run-files", runFiles); code != 0 || !strings.Contains(out, "intact: ") {
		t.Fatalf("audit verify RECEIPT --key --run-files: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := runBinary(t, "audit", "report", receipt, files[1], files[2], "--key", key, "--format", "json"); code != 0 || !strings.Contains(out, `"intact": true`) {
		t.Fatalf("audit report FILES --key --format json: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := runBinary(t, "audit", "suggest", receipt, files[1], files[2], "--format", "sollar", "--key", key); code != 0 || !strings.HasPrefix(out, "{") {
		t.Fatalf("audit suggest FILE --format sollar: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := runBinary(t, "explain", "erp.acme.example", "--manifest", dir); code != 0 || !strings.HasPrefix(out, "allow ") {
		t.Fatalf("explain HOST --manifest: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := runBinary(t, "check", dir, "--json"); code != 0 || !strings.HasPrefix(out, "[") {
		t.Fatalf("check PATH --json: exit %d\n%s%s", code, out, errs)
	}

	erpFolder(t, dir, "com.acme.erp", "1.1.0", "erp.acme.example", "new.acme.example")
	loadAsServe(t, state, dir)
	if out, errs, code := runBinary(t, "approve", "com.acme.erp", "1.1.0", "--state", state, "--digest", digestOf(t, dir), "--yes"); code != 0 || !strings.Contains(out, "approved com.acme.erp 1.1.0") {
		t.Fatalf("approve ID VERSION --state --digest --yes: exit %d\n%s%s", code, out, errs)
	}
	// "--" ends the flags: what follows is an argument, even if it reads
	// as a flag, and a flag's value may itself be "--".
	if out, errs, code := runBinary(t, "state", "forget", "--state", state, "--", "--folder"); code != exitFail || strings.Contains(errs, "flag") || !strings.Contains(out+errs, "--folder") {
		t.Fatalf("state forget --state DIR -- --folder: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := runBinary(t, "state", "forget", "com.acme.erp", "--state", state); code != 0 || !strings.Contains(out, "forgot com.acme.erp") {
		t.Fatalf("state forget ID --state: exit %d\n%s%s", code, out, errs)
	}
}
