package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyRunFilesNoticesTheNewestRunsFileDeleted is issue 13's leftover
// from session 9: deleting the newest run's whole file left the earlier
// runs verifying as intact with --run-files, since no later run names it.
// egressd run's link file (ID.lastrun) names the newest run; verify,
// report and suggest given --run-files require that run in the files, and
// a missing or rewritten link file fails them too.
func TestVerifyRunFilesNoticesTheNewestRunsFileDeleted(t *testing.T) {
	state, dir, key := t.TempDir(), erpFolder(t, t.TempDir(), "com.acme.erp", "1.0.0", "erp.acme.example"), testKey(t)
	files := unsandboxedRuns(t, state, dir, key, 3)
	runFiles := filepath.Join(state, "audit", "com.acme.erp")
	if out, errs, code := runBinary(t, "audit", "verify", "--key", key, "--run-files", runFiles); code != 0 || !strings.Contains(out, "intact: ") {
		t.Fatalf("three honest runs: exit %d\n%s%s", code, out, errs)
	}
	link := runFiles + ".lastrun"
	held, err := os.ReadFile(link)
	if err != nil {
		t.Fatal(err)
	}
	newest, _ := os.ReadFile(files[2])
	os.Remove(files[2])
	out, errs, code := runBinary(t, "audit", "verify", "--key", key, "--run-files", runFiles)
	if code != exitFail || !strings.Contains(out, "the newest run's file was removed") {
		t.Fatalf("the newest run's file deleted: exit %d, want %d and the removal named\n%s%s", code, exitFail, out, errs)
	}
	if out, errs, code := runBinary(t, "audit", "report", "--key", key, "--run-files", runFiles); code != exitFail || !strings.Contains(errs, "LOG NOT VERIFIED") {
		t.Fatalf("audit report with the newest run's file deleted: exit %d\n%s%s", code, out, errs)
	}
	// The files named by hand are verified as given: the link file speaks
	// only for --run-files, which claims to have found them all.
	if out, errs, code := runBinary(t, "audit", "verify", "--key", key, files[0], files[1]); code != 0 {
		t.Fatalf("the two older runs named by hand: exit %d\n%s%s", code, out, errs)
	}
	writeFile(t, files[2], string(newest))
	for _, c := range []struct{ name, link, want string }{
		{"the link file deleted", "", "is missing"},
		{"the link file rewritten", "junk\n", "holds something egressd did not write"},
		{"the link file names a run not here", "open 0123456789abcdef\n", "no file here holds it"},
	} {
		if c.link == "" {
			os.Remove(link)
		} else {
			writeFile(t, link, c.link)
		}
		out, errs, code := runBinary(t, "audit", "verify", "--key", key, "--run-files", runFiles)
		if code != exitFail || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d, want %d and %q\n%s%s", c.name, code, exitFail, c.want, out, errs)
		}
	}
	writeFile(t, link, string(held))
	if out, errs, code := runBinary(t, "audit", "verify", "--key", key, "--run-files", runFiles); code != 0 {
		t.Fatalf("all restored: exit %d\n%s%s", code, out, errs)
	}
}
