package audit

import (
	"bytes"
	"strings"
	"testing"
)

// TestReportShowsRecordsThatNameNoIntegration: the attempts on
// connections held open after their integration was removed were logged
// with no integration, and the report skipped them without a word. A
// record naming no integration (other than egressd's own lifecycle and
// checkpoints) is counted under "unattributed" in text, HTML and JSON.
func TestReportShowsRecordsThatNameNoIntegration(t *testing.T) {
	recs := []Record{
		{Time: at(0), Event: "lifecycle", Action: "genesis"},
		{Time: at(1), Event: "connect", Decision: "deny", Reason: "bad_request", Host: "hidden0.evil.example", Port: 443},
		{Time: at(2), Event: "connect", Decision: "deny", Reason: "bad_request", Host: "hidden0.evil.example", Port: 443},
		{Time: at(3), Event: "policy", Action: "config_refused", Err: "bad config"},
		{Time: at(4), Event: "connect", Integration: "com.atk.one", Decision: "deny", Reason: "not_allowlisted", Host: "x.example", Port: 443},
	}
	rep := BuildReport(recs, nil)
	if len(rep.Unattributed) != 2 {
		t.Fatalf("unattributed = %+v, want the two bad_request attempts and the refused config", rep.Unattributed)
	}
	var connect Unattributed
	for _, u := range rep.Unattributed {
		if u.Event == "connect" {
			connect = u
		}
	}
	if connect.Count != 2 || connect.Reason != "bad_request" || !strings.Contains(connect.Target, "hidden0.evil.example") {
		t.Fatalf("unattributed connect = %+v", connect)
	}
	var text, html bytes.Buffer
	if err := WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "unattributed") || !strings.Contains(text.String(), "hidden0.evil.example") {
		t.Fatalf("text report has no unattributed section:\n%s", text.String())
	}
	if err := WriteHTML(&html, rep); err != nil || !strings.Contains(html.String(), "Unattributed") || !strings.Contains(html.String(), "hidden0.evil.example") {
		t.Fatalf("HTML report (%v) has no unattributed section", err)
	}
}

// TestReportKeepsTheManifestOfUnattributedRecordsApart: refusals on the
// listeners of two manifests that never loaded name no integration, only
// their manifest path; the unattributed section grouped them by event,
// decision, reason and target, so both merged into rows naming neither
// (round 11 attacker, issue 18). The manifest is one of the keys, and the
// text shows it.
func TestReportKeepsTheManifestOfUnattributedRecordsApart(t *testing.T) {
	recs := []Record{
		{Time: at(1), Event: "connect", Manifest: "/srv/victim", Decision: "deny", Reason: "manifest_not_loaded", Host: "x.example", Port: 443},
		{Time: at(2), Event: "connect", Manifest: "/srv/hostile", Decision: "deny", Reason: "manifest_not_loaded", Host: "x.example", Port: 443},
	}
	rep := BuildReport(recs, nil)
	if len(rep.Unattributed) != 2 || rep.Unattributed[0].Manifest == rep.Unattributed[1].Manifest {
		t.Fatalf("unattributed = %+v, want one row per manifest", rep.Unattributed)
	}
	var text bytes.Buffer
	if err := WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"/srv/victim", "/srv/hostile"} {
		if !strings.Contains(text.String(), m) {
			t.Fatalf("text report does not name %s:\n%s", m, text.String())
		}
	}
}
