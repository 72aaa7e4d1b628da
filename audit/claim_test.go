package audit

import (
	"bytes"
	"strings"
	"testing"
)

// TestClaimsRefusalsAreReportedAsTheClaimNotAsTheOwner is issue 18's break
// 4 (f18b): a folder claiming another integration's id (a claim waiting for
// the operator) had every refusal it caused logged and reported as the
// victim's. Its events are marked with the claim, and the report shows them
// in a section of their own, never in the owner's.
func TestClaimsRefusalsAreReportedAsTheClaimNotAsTheOwner(t *testing.T) {
	recs := []Record{
		{Time: at(0), Event: "policy", Integration: "com.victim.app", IntegrationVersion: "1.0.0", Action: "loaded", Manifest: "/srv/a"},
		{Time: at(1), Event: "connect", Integration: "com.victim.app", IntegrationVersion: "1.0.0", Decision: "allow", Reason: "allowed", Host: "pub.t.example", Rule: "pub.t.example", Conn: "c1"},
		{Time: at(2), Event: "policy", Integration: "com.victim.app", IntegrationVersion: "2.0.0", Action: "pending", Pending: "2.0.0", Manifest: "/srv/b", Claim: "/srv/b"},
		{Time: at(3), Event: "connect", Integration: "com.victim.app", IntegrationVersion: "2.0.0", Decision: "deny", Reason: "pending_approval", Host: "c2.attacker.example", Claim: "/srv/b"},
		{Time: at(4), Event: "connect", Integration: "com.victim.app", IntegrationVersion: "2.0.0", Decision: "deny", Reason: "ip_literal", HostRaw: "169.254.169.254:443", Claim: "/srv/b"},
	}
	rep := BuildReport(recs, map[string][]string{"com.victim.app": {"pub.t.example"}})
	if len(rep.Integrations) != 2 {
		t.Fatalf("%d sections, want the owner's and the claim's: %+v", len(rep.Integrations), rep.Integrations)
	}
	owner, claim := rep.Integrations[0], rep.Integrations[1]
	if owner.Claim != "" || len(owner.Refused) != 0 || len(owner.Policy) != 1 || strings.Join(owner.Versions, ",") != "1.0.0" {
		t.Fatalf("the owner's section holds the claim's events: %+v", owner)
	}
	if claim.ID != "com.victim.app" || claim.Claim != "/srv/b" || len(claim.Refused) != 2 || claim.Declared != nil {
		t.Fatalf("the claim's section: %+v", claim)
	}
	var text bytes.Buffer
	WriteText(&text, rep)
	if !strings.Contains(text.String(), "== unapproved claim of com.victim.app from /srv/b") {
		t.Fatalf("text report:\n%s", text.String())
	}
	var html bytes.Buffer
	if err := WriteHTML(&html, rep); err != nil || !strings.Contains(html.String(), "unapproved claim of") {
		t.Fatalf("HTML report (%v) does not name the claim", err)
	}
}

// TestAClaimsRefusalsDoNotFoldIntoTheOwners: folding keeps a claim's
// refusals apart from the owner's alike ones.
func TestAClaimsRefusalsDoNotFoldIntoTheOwners(t *testing.T) {
	owner := Event{Kind: Connect, Integration: "com.victim.app", Decision: "deny", Reason: "not_allowlisted", Host: "x.evil.example"}
	claim := owner
	claim.Claim = "/srv/b"
	if foldClass(owner) == foldClass(claim) {
		t.Fatal("a claim's refusal folds into the owner's class")
	}
}
