package main

import (
	"os"
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
)

// TestReportOfATamperedLogSaysSoAtTheTop is issue 18's item 6: audit report
// read a log without checking its chain, so a reviewer could read the
// report of an edited log (a deny turned allow) as good. The report now
// verifies first: an edited log's report opens with the break and where it
// is, its JSON carries the verdict, and it exits 1; an intact log's report
// says it verified.
func TestReportOfATamperedLogSaysSoAtTheTop(t *testing.T) {
	events := []audit.Event{
		{Kind: audit.Connect, Integration: "com.test.weather", Decision: "deny", Reason: "not_allowlisted", Host: "exfil.evil.example", Port: 443},
		{Kind: audit.Connect, Integration: "com.test.weather", Decision: "allow", Reason: "allowed", Host: "api.weather.example", Port: 443},
	}
	intact := writeLog(t, events...)
	out, errs, code := runCLI(t, "audit", "report", "--manifest", t.TempDir(), intact)
	if code != exitOK || !strings.HasPrefix(out, "log verified: intact") {
		t.Fatalf("intact log: exit %d\n%s%s", code, out, errs)
	}

	tampered := writeLog(t, events...)
	b, _ := os.ReadFile(tampered)
	edited := strings.Replace(string(b), `"decision":"deny","reason":"not_allowlisted"`, `"decision":"allow","reason":"allowed"`, 1)
	if edited == string(b) {
		t.Fatalf("the test's edit did not apply:\n%s", b)
	}
	os.WriteFile(tampered, []byte(edited), 0o600)
	out, errs, code = runCLI(t, "audit", "report", "--manifest", t.TempDir(), tampered)
	first, _, _ := strings.Cut(out, "\n")
	if code != exitFail || !strings.HasPrefix(first, "LOG NOT VERIFIED: BROKEN: ") || !strings.Contains(first, "seq 2") {
		t.Fatalf("tampered log: exit %d, first line %q\n%s%s", code, first, out, errs)
	}
	out, _, code = runCLI(t, "audit", "report", "--format", "json", "--manifest", t.TempDir(), tampered)
	if code != exitFail || !strings.Contains(out, `"intact": false`) {
		t.Fatalf("tampered log, json: exit %d\n%s", code, out)
	}
	out, _, code = runCLI(t, "audit", "report", "--format", "html", "--manifest", t.TempDir(), tampered)
	if code != exitFail || !strings.Contains(out, "LOG NOT VERIFIED") {
		t.Fatalf("tampered log, html: exit %d\n%s", code, out)
	}
}
