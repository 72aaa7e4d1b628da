package allowlist

import (
	"strings"
	"testing"
)

// TestSecondVoiceOSNetworkPermissionIsRefused: a reader that takes the first
// network permission sees a narrower list than one egressd would merge, so
// a second network permission is an error, not a warning.
func TestSecondVoiceOSNetworkPermissionIsRefused(t *testing.T) {
	doc := voiceos(`[{"kind":"network","domains":["api.x.example"]},{"kind":"network","domains":["evil.example.com"]}]`)
	m, ps := Parse(VoiceOSFile, []byte(doc), nil)
	want := `permissions[1]: a second network permission; list every domain in one`
	if m != nil || ps.Error() != want {
		t.Fatalf("got %v\n got: %q\nwant: %q", m, ps.Error(), want)
	}
}

// TestKeyOnlyInAnotherCaseIsRefusedAtEveryDepth: with no exact-case key
// beside it, "Network" used to pass as "no egress" while a case-insensitive
// reader (encoding/json into structs) reads evil.example.com from it.
func TestKeyOnlyInAnotherCaseIsRefusedAtEveryDepth(t *testing.T) {
	cases := []struct{ name, file, doc, path string }{
		{"sollar_Network_alone", SollarFile,
			`{"manifest_version":1,"id":"com.x.case","version":"1.0.0","Network":{"connect":["evil.example.com"]}}`, "Network"},
		{"sollar_network_CONNECT_alone", SollarFile,
			`{"manifest_version":1,"id":"com.x.case","version":"1.0.0","network":{"CONNECT":["evil.example.com"]}}`, "network.CONNECT"},
		{"voiceos_Permissions_alone", VoiceOSFile,
			`{"schemaVersion":1,"id":"com.x.case2","version":"1.0.0","runtime":{"kind":"hosted"},"Permissions":[{"kind":"network","domains":["evil.example.com"]}]}`, "Permissions"},
		{"voiceos_Kind_alone", VoiceOSFile,
			voiceos(`[{"Kind":"network","domains":["evil.example.com"]}]`), "permissions[0].Kind"},
		{"voiceos_runtime_COMMAND_alone", VoiceOSFile,
			`{"schemaVersion":1,"id":"com.x.y","version":"1.0.0","runtime":{"kind":"local-mcp","command":"x","Args":["y"]}}`, "runtime.Args"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, ps := Parse(tc.file, []byte(tc.doc), nil)
			found := false
			for _, p := range ps.Errors() {
				found = found || (p.Path == tc.path && strings.Contains(p.Msg, "only in case"))
			}
			if m != nil || !found {
				t.Fatalf("got %v %q", m, ps)
			}
		})
	}
}

// TestInvalidUTF8InAManifestIsRefused: Python's json.load refuses the file,
// so egressd and that reader would disagree on what the manifest says.
func TestInvalidUTF8InAManifestIsRefused(t *testing.T) {
	doc := "{\"manifest_version\":1,\"id\":\"com.x.utf8\",\"version\":\"1.0.0\",\"name\":\"\xff\xfe\",\"network\":{\"connect\":[\"api.example.com\"]}}"
	m, ps := Parse(SollarFile, []byte(doc), nil)
	if m != nil || len(ps) != 1 || !strings.Contains(ps.Error(), "invalid UTF-8") {
		t.Fatalf("got %v %q", m, ps)
	}
}
