package audit

import (
	"strconv"
	"strings"
	"testing"
)

// frontedHello is a domain-fronting refusal: a CONNECT to an allowed host
// whose ClientHello named sni.
func frontedHello(sni string) Event {
	return Event{Kind: Connect, Integration: "com.atk.one", Decision: "deny", Reason: "sni_mismatch", Host: "pub.t.example", Port: 443, Rule: "pub.t.example", SNI: sni}
}

// sniDecoyFlood is issue 18's break 1 (f18b): 41 CONNECTs to the allowed
// pub.t.example within one second, 40 with SNI decoyN.evil.example and one,
// the 21st, with SNI admin.victim-bank.example.
func sniDecoyFlood(f *foldLog) {
	for i := range 41 {
		sni := "decoy" + strconv.Itoa(i) + ".evil.example"
		if i == 20 {
			sni = "admin.victim-bank.example"
		}
		f.s.Write(frontedHello(sni))
	}
}

// TestDomainFrontingTargetHiddenAmongSNIDecoysGetsALineOfItsOwn: folding
// grouped sni_mismatch targets by the CONNECT host's parent, so the one
// fronting target behind 40 decoys of one domain was only counted as
// unlisted and named nowhere. The SNI's registrable domain is its group
// now: a new one gets a line within the budgets, as a plain name does.
func TestDomainFrontingTargetHiddenAmongSNIDecoysGetsALineOfItsOwn(t *testing.T) {
	f := newFoldLog(t)
	sniDecoyFlood(f)
	lines := f.lines(t)
	var named bool
	for _, l := range lines {
		if l["sni"] == "admin.victim-bank.example" && l["suppressed"] == nil {
			named = true
		}
	}
	if !named {
		t.Fatalf("no line of its own for the SNI admin.victim-bank.example:\n%s", f.buf.String())
	}
	if n := accounted(lines); n != 41 {
		t.Fatalf("the lines stand for %d events, want 41", n)
	}
}

// TestSNIGroupIsTheRegistrableDomainNotTheLastTwoLabels: decoys under one
// registrable domain of a multi-label public suffix (x.evil.co.uk) do not
// share a group with another domain under it (victim-bank.co.uk).
func TestSNIGroupIsTheRegistrableDomainNotTheLastTwoLabels(t *testing.T) {
	f := newFoldLog(t)
	for i := range 30 {
		sni := "d" + strconv.Itoa(i) + ".evil.co.uk"
		if i == 10 {
			sni = "admin.victim-bank.co.uk"
		}
		f.s.Write(frontedHello(sni))
	}
	if !strings.Contains(f.buf.String(), `"sni":"admin.victim-bank.co.uk"`) {
		t.Fatalf("admin.victim-bank.co.uk has no line:\n%s", f.buf.String())
	}
}

// TestReportCountsEveryFoldedAttemptAtAnEntry: the report said 12
// attempts at pub.t.example when 41 were made, leaving out the attempts a
// summary counted as unlisted. A summary now counts its unlisted events per
// rule, and the report adds them to the entry's attempts.
func TestReportCountsEveryFoldedAttemptAtAnEntry(t *testing.T) {
	f := newFoldLog(t)
	sniDecoyFlood(f)
	for i := range 100 { // more than one summary's sample can list
		f.s.Write(frontedHello("x" + strconv.Itoa(i) + ".evil.example"))
	}
	rep := BuildReport(f.records(t), map[string][]string{"com.atk.one": {"pub.t.example", "unused.t.example"}})
	ir := rep.Integrations[0]
	if len(ir.TriedNeverConnected) != 1 || ir.TriedNeverConnected[0].Attempts != 141 || ir.TriedNeverConnected[0].Reasons["sni_mismatch"] != 141 {
		t.Fatalf("tried, never connected = %+v, want pub.t.example with 141 attempts\n%s", ir.TriedNeverConnected, f.buf.String())
	}
	var refused int64
	for _, r := range ir.Refused {
		refused += r.Count
	}
	if refused != 141 {
		t.Fatalf("%d refusals reported, want 141: %+v", refused, ir.Refused)
	}
}
