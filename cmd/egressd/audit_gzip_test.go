package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gzipFile replaces path with path+".gz", as logrotate's compress does,
// and returns the new name.
func gzipFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writeGzip(t, path+".gz", data)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	return path + ".gz"
}

func writeGzip(t *testing.T, path string, data []byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestACompressedRotationIsVerifiedAndReportedAndAMissingOneStillFails is
// issue 13 (f13o item 6): logrotate's compress leaves audit.log.1.gz, and
// verify and report read its gzip bytes as audit lines ("not a chained
// audit line"), so an operator following logrotate's defaults could verify
// nothing. A compressed file is read through gzip, bounded: verify and
// report take it (and --run-files finds egressd run's ID.PID.log.1.gz); the
// rotation left out still fails verify as before; a file that inflates
// far past what an audit log compresses to, or is not gzip past its magic,
// is refused with a line naming it.
func TestACompressedRotationIsVerifiedAndReportedAndAMissingOneStillFails(t *testing.T) {
	files, _ := realLog(t, false)
	rotated := gzipFile(t, files[0])
	if out, code := verify(t, rotated, files[1]); code != 0 || !strings.Contains(out, "intact: ") {
		t.Fatalf("verify audit.log.1.gz audit.log: exit %d\n%s", code, out)
	}
	if out, errs, code := runBinary(t, "audit", "report", rotated, files[1]); code != 0 || !strings.Contains(out, "log verified: intact") || !strings.Contains(out, "evil0.example") {
		t.Fatalf("report audit.log.1.gz audit.log: exit %d\n%s%s", code, out, errs)
	}
	if out, code := verify(t, files[1]); code != 1 || !strings.Contains(out, "continues from an earlier file that was not given") {
		t.Fatalf("the compressed rotation left out: exit %d\n%s", code, out)
	}

	bomb := filepath.Join(t.TempDir(), "audit.log.2.gz")
	writeGzip(t, bomb, bytes.Repeat([]byte(`{"event":"connect","host":"x.example"}`+"\n"), 1<<20))
	if out, errs, code := runBinary(t, "audit", "report", bomb, rotated, files[1]); code == 0 || !strings.Contains(errs, bomb+": decompresses to more than") {
		t.Fatalf("report of a gzip bomb (report reads on past a break): exit %d\n%.2000s%.2000s", code, out, errs)
	}
	junk := filepath.Join(t.TempDir(), "audit.log.3.gz")
	writeFile(t, junk, "\x1f\x8bnot gzip at all\n")
	if out, errs, code := runBinary(t, "audit", "verify", junk); code == 0 || !strings.Contains(errs, junk+": ") || !strings.Contains(errs, "gzip") {
		t.Fatalf("verify of a file with gzip's magic and no gzip: exit %d\n%s%s", code, out, errs)
	}

	state, dir, key := t.TempDir(), erpFolder(t, t.TempDir(), "com.acme.erp", "1.0.0", "erp.acme.example"), testKey(t)
	runs := unsandboxedRuns(t, state, dir, key, 2)
	if err := os.Rename(runs[0], runs[0]+".1"); err != nil {
		t.Fatal(err)
	}
	gzipFile(t, runs[0]+".1")
	runFiles := filepath.Join(state, "audit", "com.acme.erp")
	if out, errs, code := runBinary(t, "audit", "verify", "--key", key, "--run-files", runFiles); code != 0 || !strings.Contains(out, "intact: ") || !strings.Contains(out, "2 chain(s)") {
		t.Fatalf("verify --run-files with ID.PID.log.1.gz: exit %d\n%s%s", code, out, errs)
	}
}

// TestACompressedRotationCutShortIsBrokenNotAUsageError: round 38. A .gz
// rotation with its last bytes cut made verify exit 2 ("usage") with the
// gzip error, where a plain log cut back exits 1: a monitor alarming on 1
// missed it. A damaged stream is a broken log.
func TestACompressedRotationCutShortIsBrokenNotAUsageError(t *testing.T) {
	files, _ := realLog(t, false)
	rotated := gzipFile(t, files[0])
	data, err := os.ReadFile(rotated)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rotated, data[:len(data)-20], 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := runBinary(t, "audit", "verify", rotated, files[1]); code != 1 || !strings.Contains(out, "BROKEN") {
		t.Fatalf("verify of a cut .gz rotation: exit %d\n%s%s", code, out, errs)
	}
}
