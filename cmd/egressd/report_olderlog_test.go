package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
)

// A log whose policy events record no list in force (an older egressd's)
// is judged by the manifest file as it is at report time: a list that may
// never have been in force. The report says so, naming the file; a log
// that records the list says nothing of the kind.
func TestReportSaysWhenItJudgesAnOlderLogByTheManifestFileAsItIsNow(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "manifest.json")
	writeFile(t, manifest, `{"manifest_version":1,"id":"com.test.weather","version":"1.0.0","network":{"connect":["api.weather.example","rewritten-later.example"]}}`)
	older := writeLog(t,
		audit.Event{Kind: audit.Policy, Integration: "com.test.weather", IntegrationVersion: "1.0.0", Action: "loaded", Manifest: dir},
		audit.Event{Kind: audit.Connect, Integration: "com.test.weather", Decision: "allow", Reason: "allowlisted", Host: "api.weather.example", Port: 443, Rule: "api.weather.example"})
	out, errs, code := runCLI(t, "audit", "report", older)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := "judged by:\tthe manifest file " + dir + " as it is now, not the list in force then: this log records none (an egressd before the list was recorded)"
	if !strings.Contains(out, "rewritten-later.example") || !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
		t.Fatalf("the report does not say its unused entries come from the manifest file as it is now:\n%s", out)
	}
	js, _, _ := runCLI(t, "audit", "report", "--format", "json", older)
	var rep audit.Report
	if err := json.Unmarshal([]byte(js), &rep); err != nil || len(rep.Integrations) != 1 || !strings.Contains(rep.Integrations[0].DeclaredFrom, dir+" as it is now") {
		t.Fatalf("json: %v %+v", err, rep.Integrations)
	}
	if html, _, _ := runCLI(t, "audit", "report", "--format", "html", older); !strings.Contains(html, "Judged by the manifest file "+dir+" as it is now") || !strings.Contains(html, "rewritten-later.example") {
		t.Fatalf("html does not say it:\n%s", html)
	}

	recorded := writeLog(t,
		audit.Event{Kind: audit.Policy, Integration: "com.test.weather", IntegrationVersion: "1.0.0", Action: "loaded", Manifest: dir, Entries: []string{"api.weather.example", "then-unused.example"}},
		audit.Event{Kind: audit.Connect, Integration: "com.test.weather", Decision: "allow", Reason: "allowlisted", Host: "api.weather.example", Port: 443, Rule: "api.weather.example"})
	os.Remove(manifest)
	out, errs, code = runCLI(t, "audit", "report", recorded)
	if code != exitOK || strings.Contains(out, "as it is now") || !strings.Contains(out, "then-unused.example") {
		t.Fatalf("a log recording its lists: exit %d\n%s%s", code, out, errs)
	}
}
