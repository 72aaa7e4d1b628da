package audit

import (
	"bytes"
	"strings"
	"testing"
)

// TestHTMLReportEscapesABidiOverrideInAFolderName is round 27's item 4:
// the text report escapes a folder name's U+202E (right-to-left
// override), but the HTML report printed it raw, so "/srv/evil‮txt.exe"
// read reversed in the reviewer's browser. Every name in the page now
// goes through the text report's escaping (termsafe), the page's own
// line breaks kept.
func TestHTMLReportEscapesABidiOverrideInAFolderName(t *testing.T) {
	folder := "/srv/evil\u202egnp.exe\u2066x\u2069\u200b"
	recs := []Record{
		{Time: at(0), Event: "policy", Integration: "com.victim.app", IntegrationVersion: "1.0.0", Action: "loaded", Manifest: "/srv/a"},
		{Time: at(2), Event: "policy", Integration: "com.victim.app", IntegrationVersion: "2.0.0", Action: "pending", Pending: "2.0.0", Manifest: folder, Claim: folder},
		{Time: at(3), Event: "connect", Integration: "com.victim.app", IntegrationVersion: "2.0.0", Decision: "deny", Reason: "pending_approval", Host: "c2.attacker.example", Claim: folder},
	}
	rep := BuildReport(recs, nil)
	var text, html bytes.Buffer
	WriteText(&text, rep)
	if strings.ContainsAny(text.String(), "\u202e\u2066\u2069\u200b") || !strings.Contains(text.String(), "unapproved claim of com.victim.app from") {
		t.Fatalf("the text report does not escape the folder, so this test proves nothing:\n%s", text.String())
	}
	if err := WriteHTML(&html, rep); err != nil {
		t.Fatal(err)
	}
	page := html.String()
	if strings.ContainsAny(page, "\u202e\u2066\u2069\u200b") || !strings.Contains(page, `evil\u202egnp.exe\u2066x\u2069\u200b`) {
		t.Fatalf("the HTML report prints the folder's bidi controls raw:\n%s", page)
	}
	if !strings.Contains(page, "\n<") {
		t.Fatalf("the page's own line breaks were escaped:\n%s", page)
	}
}
