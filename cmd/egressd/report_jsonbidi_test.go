package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
)

// TestReportJSONAndHTMLEscapeABidiOverrideInAClaimsFolder: a claiming
// folder's name holding U+202E was escaped by the text report but printed
// raw by --format json (encoding/json leaves bidi controls alone) and
// --format html. Both now escape it (JSON as \u202e, the same value).
func TestReportJSONAndHTMLEscapeABidiOverrideInAClaimsFolder(t *testing.T) {
	folder := "/srv/evil\u202egnp.exe"
	log := writeLog(t,
		audit.Event{Kind: audit.Policy, Integration: "com.test.victim", IntegrationVersion: "2.0.0", Action: "pending", Pending: "2.0.0", Manifest: folder, Claim: folder},
		audit.Event{Kind: audit.Connect, Integration: "com.test.victim", IntegrationVersion: "2.0.0", Decision: "deny", Reason: "pending_approval", Host: "c2.attacker.example", Claim: folder},
	)
	out, errs, code := runCLI(t, "audit", "report", "--format", "json", log)
	if code != exitOK || strings.Contains(out, "\u202e") || !strings.Contains(out, `\u202e`) {
		t.Fatalf("report --format json: exit %d, the folder's bidi control raw or missing:\n%s%s", code, out, errs)
	}
	var rep audit.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Integrations) != 1 || rep.Integrations[0].Claim != folder {
		t.Fatalf("the JSON does not decode to the folder as it is (%v): %+v", err, rep.Integrations)
	}
	html, _, _ := runCLI(t, "audit", "report", "--format", "html", log)
	if strings.Contains(html, "\u202e") || !strings.Contains(html, `evil\u202egnp.exe`) {
		t.Fatalf("report --format html prints the folder's bidi control raw:\n%s", html)
	}
}
