package allowlist

import (
	"fmt"
	"strings"
	"testing"
)

// longIDManifest is the attacker's: an id whose distinguishing part lies
// beyond the audit log's field cap.
func longIDManifest(id, version, host string) string {
	return `{"schemaVersion":1,"id":"` + id + `","name":"n","version":"` + version + `","runtime":{"kind":"local-mcp","command":"node"},"permissions":[{"kind":"network","domains":["` + host + `"]}]}`
}

// Ids and versions had a pattern but no length: two ids that differ only
// after byte 256 loaded as two integrations and were logged as one.
func TestAnIDLongerThanTheBoundIsRefused(t *testing.T) {
	prefix := "com.a18." + strings.Repeat("x", 250)
	for _, id := range []string{prefix + ".benign", prefix + ".hostile", "com." + strings.Repeat("a", MaxIDLength-3)} {
		m, ps := Parse(VoiceOSFile, []byte(longIDManifest(id, "1.0.0", "api.benign.example")), nil)
		want := fmt.Sprintf("id: %d bytes; an id is at most %d bytes", len(id), MaxIDLength)
		if m != nil || len(ps) != 1 || ps[0].String() != want {
			t.Errorf("id of %d bytes: manifest loaded = %v, problems %v, want %q", len(id), m != nil, ps, want)
		}
	}
	atBound := "com." + strings.Repeat("a", MaxIDLength-4)
	if m, ps := Parse(VoiceOSFile, []byte(longIDManifest(atBound, "1.0.0", "api.benign.example")), nil); m == nil {
		t.Fatalf("an id of exactly %d bytes is refused: %v", MaxIDLength, ps)
	}
}

func TestAVersionLongerThanTheBoundIsRefused(t *testing.T) {
	v := "1.0.0-" + strings.Repeat("a", 300)
	m, ps := Parse(VoiceOSFile, []byte(longIDManifest("com.a18.v", v, "api.benign.example")), nil)
	want := fmt.Sprintf("version: %d bytes; a version is at most %d bytes", len(v), MaxVersionLength)
	if m != nil || len(ps) != 1 || ps[0].String() != want {
		t.Fatalf("loaded = %v, problems %v, want %q", m != nil, ps, want)
	}
	atBound := "1.0.0-" + strings.Repeat("a", MaxVersionLength-6)
	if m, ps := Parse(VoiceOSFile, []byte(longIDManifest("com.a18.v", atBound, "api.benign.example")), nil); m == nil {
		t.Fatalf("a version of exactly %d bytes is refused: %v", MaxVersionLength, ps)
	}
}

// A list longer than the audit record holds was loaded (with a warning)
// and then enforced without its policy event recording it; a report
// judged it against the manifest file as rewritten later.
func TestAListLongerThanTheAuditRecordHoldsIsRefused(t *testing.T) {
	hosts := func(n int) string {
		var list []string
		for i := 0; i < n; i++ {
			list = append(list, fmt.Sprintf(`"h%d.example.com"`, i))
		}
		return strings.Join(list, ",")
	}
	doc := voiceos(`[{"kind":"network","domains":[` + hosts(1100) + `]}]`)
	m, ps := Parse(VoiceOSFile, []byte(doc), nil)
	want := fmt.Sprintf("permissions[0].domains: 1100 entries; a manifest lists at most %d (the audit log records the whole list in force)", MaxEntries)
	if m != nil || !ps.HasErrors() || ps.Errors()[0].String() != want {
		t.Fatalf("loaded = %v, problems %v, want %q", m != nil, ps.Errors(), want)
	}
	doc = `{"manifest_version":1,"id":"com.acme.erp","version":"2.4.1","network":{"connect":[` + hosts(MaxEntries) + `]}}`
	if m, ps := Parse(SollarFile, []byte(doc), nil); m == nil || len(m.Entries) != MaxEntries {
		t.Fatalf("a list of exactly %d entries is refused: %v", MaxEntries, ps.Errors())
	}
}
