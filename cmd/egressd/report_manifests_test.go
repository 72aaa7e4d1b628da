package main

import (
	"strings"
	"testing"
)

// TestAuditReportJudgesOnlyTheIDOfEachManifestNamed is round 42's F3:
// "audit report --manifest" for another integration blanked this one's
// unused entries (read from the list its log records) to "manifest not
// found", and two manifests of one id were judged as one list that
// neither holds. A manifest named judges its own id only, and two named
// for one id are refused.
func TestAuditReportJudgesOnlyTheIDOfEachManifestNamed(t *testing.T) {
	state, key := t.TempDir(), testKey(t)
	dir := erpFolder(t, t.TempDir(), "com.acme.erp", "1.0.0", "erp.acme.example")
	files := unsandboxedRuns(t, state, dir, key, 1)
	weather := erpFolder(t, t.TempDir(), "com.acme.weather", "1.0.0", "api.weather.example")
	out, errs, code := runBinary(t, "audit", "report", "--key", key, "--manifest", weather, files[0])
	if code != exitOK || !strings.Contains(out, "erp.acme.example") || strings.Contains(out, "manifest not found") {
		t.Fatalf("--manifest of another id: exit %d\n%s%s", code, out, errs)
	}
	other := erpFolder(t, t.TempDir(), "com.acme.erp", "1.0.0", "zzz.acme.example")
	out, errs, code = runBinary(t, "audit", "report", "--key", key, "--manifest", other, "--manifest", dir, files[0])
	if code != exitUsage || !strings.Contains(errs, "both declare com.acme.erp") || strings.Contains(out, "zzz.acme.example") {
		t.Fatalf("two --manifest of one id: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = runBinary(t, "audit", "report", "--key", key, "--format", "json", "--manifest", other, files[0])
	if code != exitOK || !strings.Contains(out, "zzz.acme.example") || strings.Contains(out, `"erp.acme.example"`) {
		t.Fatalf("--manifest of the id judges by it alone: exit %d\n%s%s", code, out, errs)
	}
}
