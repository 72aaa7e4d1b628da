package allowlist

import (
	"strings"
	"testing"
)

// TestKeyWithEscapedNULBesideTheRealOneIsRefused: "network\u0000" beside
// "network" decodes as a second key to egressd, but a C reader (json-c)
// stops at the NUL and reads a second "network" list, keeping the last.
// Any key, at any depth, or a kind holding a control character is an error.
func TestKeyWithEscapedNULBesideTheRealOneIsRefused(t *testing.T) {
	cases := []struct{ name, file, doc, path string }{
		{"sollar_network_nul", SollarFile,
			`{"manifest_version":1,"id":"com.x.nul","version":"1.0.0","network":{"connect":["evil.example"]},"network\u0000":{"connect":["api.good.example"]}}`, "network"},
		{"sollar_connect_nul", SollarFile,
			`{"manifest_version":1,"id":"com.x.nul","version":"1.0.0","network":{"connect":["evil.example"],"connect\u0000":["api.good.example"]}}`, "network.connect"},
		{"voiceos_permissions_nul", VoiceOSFile,
			`{"schemaVersion":1,"id":"com.x.nul","version":"1.0.0","runtime":{"kind":"hosted"},"permissions":[{"kind":"network","domains":["evil.example"]}],"permissions\u0000":[{"kind":"network","domains":["api.good.example"]}]}`, "permissions"},
		{"voiceos_domains_nul", VoiceOSFile,
			voiceos(`[{"kind":"network","domains":["evil.example"]},{"kind":"audio","domains\u0000":["api.good.example"]}]`), "permissions[1].domains"},
		{"key_with_DEL", SollarFile,
			`{"manifest_version":1,"id":"com.x.nul","version":"1.0.0","network\u007f":{},"network":{"connect":["evil.example"]}}`, "network"},
		{"key_with_C1", SollarFile,
			`{"manifest_version":1,"id":"com.x.nul","version":"1.0.0","name\u0085":"x","network":{"connect":["evil.example"]}}`, "name"},
		{"key_with_tab", SollarFile,
			`{"manifest_version":1,"id":"com.x.nul","version":"1.0.0","network\t":{},"network":{"connect":["evil.example"]}}`, "network"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, ps := Parse(tc.file, []byte(tc.doc), nil)
			found := false
			for _, p := range ps.Errors() {
				found = found || (strings.HasPrefix(p.Path, tc.path) && strings.Contains(p.Msg, "control character"))
			}
			if m != nil || !found {
				t.Fatalf("got %v %q", m, ps)
			}
			if strings.ContainsAny(ps.Error(), "\x00\x7f\t\u0085") {
				t.Fatalf("a control character reached the report: %q", ps.Error())
			}
		})
	}
}

// TestKindWithEscapedNULIsRefused: {"kind":"network\u0000"} is not the
// network permission to egressd, but is to a reader that stops at NUL.
func TestKindWithEscapedNULIsRefused(t *testing.T) {
	for _, kind := range []string{`network\u0000`, `network\u0000x`, `net\u001bwork`, `network\u009f`} {
		doc := voiceos(`[{"kind":"network","domains":["evil.example"]},{"kind":"` + kind + `"}]`)
		m, ps := Parse(VoiceOSFile, []byte(doc), nil)
		found := false
		for _, p := range ps.Errors() {
			found = found || (p.Path == "permissions[1].kind" && strings.Contains(p.Msg, "control character"))
		}
		if m != nil || !found {
			t.Fatalf("kind %s: got %v %q", kind, m, ps)
		}
	}
}
