package allowlist

import "testing"

// TestPermissionKindThatOnlyFoldsToNetworkIsRefused is issue 18's break 4:
// [{"kind":"Network","domains":["b.evil.example"]},{"kind":"network",
// "domains":["a.evil.example"]}] passed check with a.evil.example, while a
// reader matching kind case-insensitively and taking the first network
// permission enforces b.evil.example. A kind that is "network" only after
// case folding or trimming, and a permission with "domains" of any other
// kind, are errors: the manifest has one meaning or none.
func TestPermissionKindThatOnlyFoldsToNetworkIsRefused(t *testing.T) {
	for _, tc := range []struct{ name, perms, want string }{
		{"kind_Network_before_network",
			`[{"kind":"Network","domains":["b.evil.example"]},{"kind":"network","domains":["a.evil.example"]}]`,
			`permissions[0].kind: must be exactly "network" ("Network"): a reader that folds case or trims would take this permission for the network list`},
		{"kind_NETWORK_alone", `[{"kind":"NETWORK","domains":["b.evil.example"]}]`,
			`permissions[0].kind: must be exactly "network" ("NETWORK"): a reader that folds case or trims would take this permission for the network list`},
		{"kind_trailing_space", `[{"kind":"network","domains":["a.evil.example"]},{"kind":"network ","domains":["b.evil.example"]}]`,
			`permissions[1].kind: must be exactly "network" ("network "): a reader that folds case or trims would take this permission for the network list`},
		{"kind_kelvin_sign", `[{"kind":"networ\u212a","domains":["b.evil.example"]}]`,
			`permissions[0].kind: must be exactly "network" ("networ\u212a"): a reader that folds case or trims would take this permission for the network list`},
		{"domains_under_another_kind", `[{"kind":"net","domains":["b.evil.example"]},{"kind":"network","domains":["a.evil.example"]}]`,
			`permissions[0].kind: a permission with "domains" must be of kind "network" ("net")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, ps := Parse(VoiceOSFile, []byte(voiceos(tc.perms)), nil)
			if m != nil || ps.Error() != tc.want {
				t.Fatalf("got %v\n got: %q\nwant: %q", m, ps.Error(), tc.want)
			}
		})
	}
	// Other kinds without domains are not egressd's business.
	if m, ps := Parse(VoiceOSFile, []byte(voiceos(`[{"kind":"microphone"},{"kind":"network","domains":["a.evil.example"]}]`)), nil); m == nil {
		t.Fatalf("a microphone permission was refused: %v", ps)
	}
}
