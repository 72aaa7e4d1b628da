package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// An integration whose manifest never loaded in a run (a rolled-back
// version) had a policy event with no list at all, which a report reads
// as a log from an older egressd: it judged the id by the manifest file
// as it is at report time. Nothing was in force, and the event says so.
func TestAPolicyEventOfAnIntegrationThatNeverLoadedRecordsThatNothingWasInForce(t *testing.T) {
	f := newTwoIntegrations(t)
	erpFolder(t, f.hostile, "com.test.hostile", "1.1.0", "h.example")
	first := serveInProcess(t, f.cfg)
	waitFor(t, &first.stderr, `serving com\.test\.hostile on`) // version memory saw 1.1.0
	first.stop(t)
	if err := os.Rename(f.audit, f.audit+".first"); err != nil {
		t.Fatal(err)
	}

	erpFolder(t, f.hostile, "com.test.hostile", "1.0.0", "h.example", "later.example")
	sv := serveInProcess(t, f.cfg)
	startsRefusingOnlyTheHostile(t, f, sv, "version 1.0.0 is lower than 1.1.0")
	sv.stop(t)
	log, _ := os.ReadFile(f.audit)
	if !regexp.MustCompile(`"integration":"com.test.hostile"[^\n]*"action":"failed"[^\n]*"entries":\[\]`).Match(log) {
		t.Fatalf("the failed load's policy event does not record an empty list in force:\n%s", log)
	}
	out, errs, code := runCLI(t, "audit", "report", f.audit)
	if code != exitOK || strings.Contains(out, "as it is now") || strings.Contains(out, "later.example") {
		t.Fatalf("the report judged a never-loaded id by its manifest file: exit %d\n%s%s", code, out, errs)
	}
}
