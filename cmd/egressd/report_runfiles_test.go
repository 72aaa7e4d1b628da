package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditReportNamesItsFilesAsVerifyDoes is issue 13 (f13o item 2):
// audit verify finds egressd run's files with --run-files STATE/audit/ID
// and takes a list whole with --files-from, but audit report had neither,
// so the operator built the file list by hand for the report of the very
// files verify had just checked. Report takes both, read by verify's code:
// the same files, in the same order, verified before the report.
func TestAuditReportNamesItsFilesAsVerifyDoes(t *testing.T) {
	state, dir, key := t.TempDir(), erpFolder(t, t.TempDir(), "com.acme.erp", "1.0.0", "erp.acme.example"), testKey(t)
	files := unsandboxedRuns(t, state, dir, key, 2)
	runFiles := filepath.Join(state, "audit", "com.acme.erp")
	out, errs, code := runBinary(t, "audit", "report", "--key", key, "--format", "json", "--run-files", runFiles)
	if code != 0 || !strings.Contains(out, `"intact": true`) || !strings.Contains(out, files[0]) || !strings.Contains(out, files[1]) {
		t.Fatalf("audit report --run-files: exit %d\n%s%s", code, out, errs)
	}
	list := filepath.Join(t.TempDir(), "files.txt")
	writeFile(t, list, files[0]+"\n"+files[1]+"\n")
	out, errs, code = runBinary(t, "audit", "report", "--key", key, "--format", "json", "--files-from", list)
	if code != 0 || !strings.Contains(out, `"intact": true`) {
		t.Fatalf("audit report --files-from: exit %d\n%s%s", code, out, errs)
	}
	// The order is verify's: the second run alone first does not verify.
	writeFile(t, list, files[1]+"\n"+files[0]+"\n")
	if out, errs, code := runBinary(t, "audit", "report", "--key", key, "--files-from", list); code != exitFail || !strings.Contains(errs, "LOG NOT VERIFIED") {
		t.Fatalf("audit report --files-from in the wrong order: exit %d\n%s%s", code, out, errs)
	}
	os.Remove(files[0])
	if out, errs, code := runBinary(t, "audit", "report", "--key", key, "--run-files", runFiles); code != exitFail || !strings.Contains(errs, "LOG NOT VERIFIED") {
		t.Fatalf("audit report --run-files with the first run's file deleted: exit %d\n%s%s", code, out, errs)
	}
}
