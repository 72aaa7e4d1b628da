package allowlist

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// sollarWithVoiceOSKeys is the issue 18.1 manifest: a Sollar manifest.json
// whose store shows network.connect, carrying schemaVersion and a VoiceOS
// permissions list that used to be the one enforced.
const sollarWithVoiceOSKeys = `{"manifest_version":1,"schemaVersion":1,"id":"com.acme.erp","version":"2.4.1",
"runtime":{"kind":"hosted"},
"network":{"connect":["api.acme.example"]},
"permissions":[{"kind":"network","domains":["evil.attacker.example"]}]}`

func TestSollarManifestWithSchemaVersionIsNotReadAsVoiceOS(t *testing.T) {
	m, ps := Parse(SollarFile, []byte(sollarWithVoiceOSKeys), nil)
	if m != nil {
		t.Fatalf("loaded as %s with %v", m.Format, m.Entries)
	}
	want := `permissions: a voiceos network key in a sollar manifest.json; the file name decides the format, and sollar lists hosts in network.connect`
	if ps.Error() != want {
		t.Fatalf("problems\n got: %q\nwant: %q", ps.Error(), want)
	}

	// schemaVersion alone is a key Sollar does not use: the file name still
	// decides, and the list is network.connect.
	m, ps = Parse(SollarFile, []byte(`{"manifest_version":1,"schemaVersion":1,"id":"com.acme.erp","version":"2.4.1","network":{"connect":["api.acme.example"]}}`), nil)
	if m == nil || m.Format != Sollar || len(m.Entries) != 1 || m.Entries[0].String() != "api.acme.example" {
		t.Fatalf("got %+v %v", m, ps)
	}
}

func TestVoiceOSManifestCarryingSollarNetworkIsRefused(t *testing.T) {
	doc := `{"schemaVersion":1,"manifest_version":1,"id":"com.x.y","version":"1.0.0","runtime":{"kind":"hosted"},
	"permissions":[{"kind":"network","domains":["api.x.example"]}],"network":{"connect":["evil.attacker.example"]}}`
	m, ps := Parse(VoiceOSFile, []byte(doc), nil)
	want := `network: a sollar network key in a voiceos voiceos.integration.json; the file name decides the format, and voiceos lists hosts in permissions[].domains`
	if m != nil || ps.Error() != want {
		t.Fatalf("got %v\n got: %q\nwant: %q", m, ps.Error(), want)
	}
}

func TestFileNameDecidesTheFormat(t *testing.T) {
	cases := []struct {
		name, file, doc string
		want            Format
		problem         string
	}{
		{"sollar_name_in_a_folder_path", "/srv/apps/erp/" + SollarFile, `{"manifest_version":1,"id":"com.a.b","version":"1.0.0"}`, Sollar, ""},
		{"voiceos_name_beats_manifest_version", VoiceOSFile, `{"schemaVersion":1,"manifest_version":1,"id":"com.a.b","version":"1.0.0","runtime":{"kind":"hosted"}}`, VoiceOS, ""},
		{"a_name_that_only_ends_like_voiceos_is_not_voiceos", "evil-" + VoiceOSFile, `{"manifest_version":1,"id":"com.a.b","version":"1.0.0"}`, Sollar, ""},
		{"unknown_name_with_both_markers_is_refused", "x.json", `{"schemaVersion":1,"manifest_version":1,"id":"com.a.b","version":"1.0.0"}`, Unknown,
			`carries both schemaVersion (voiceos.integration.json) and manifest_version (manifest.json); name the file for its format`},
		{"unknown_name_content_decides_other_keys_still_refused", "x.json", `{"schemaVersion":1,"id":"com.a.b","version":"1.0.0","runtime":{"kind":"hosted"},"NETWORK":{}}`, Unknown,
			`NETWORK: a sollar network key in a voiceos manifest; the file name decides the format, and voiceos lists hosts in permissions[].domains`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, ps := Parse(tc.file, []byte(tc.doc), nil)
			if tc.problem != "" {
				if m != nil || ps.Error() != tc.problem {
					t.Fatalf("got %v\n got: %q\nwant: %q", m, ps.Error(), tc.problem)
				}
				return
			}
			if m == nil || m.Format != tc.want {
				t.Fatalf("got %+v %v", m, ps)
			}
		})
	}
}

func TestCaseFoldedDuplicateKeysAreRefusedAtEveryDepth(t *testing.T) {
	cases := []struct{ name, file, doc, path string }{
		{"sollar_Network_beside_network", SollarFile,
			`{"manifest_version":1,"id":"com.a.b","version":"1.0.0","network":{"connect":["a.example.com"]},"Network":{"connect":["evil.example"]}}`, "Network"},
		{"voiceos_PERMISSIONS_beside_permissions", VoiceOSFile,
			voiceos(`[{"kind":"network","domains":["a.example.com"]}],"PERMISSIONS":[{"kind":"network","domains":["evil.example"]}]`), "PERMISSIONS"},
		{"nested_DOMAINS_beside_domains", VoiceOSFile,
			voiceos(`[{"kind":"network","domains":["a.example.com"],"DOMAINS":["evil.example"]}]`), "permissions[0].DOMAINS"},
		{"kelvin_sign_kind", VoiceOSFile,
			voiceos(`[{"kind":"network","\u212Aind":"notify","domains":[]}]`), "permissions[0].\u212Aind"},
		{"dotted_capital_I_id_as_encoding_json_folds_it", SollarFile,
			`{"manifest_version":1,"id":"com.a.b","\u0130D":"com.evil.x","version":"1.0.0"}`, "\u0130D"},
		{"deep_inside_a_field_egressd_ignores", VoiceOSFile,
			voiceos(`[],"tools":[{"inputSchema":{"properties":{"q":{},"Q":{}}}}]`), "tools[0].inputSchema.properties.Q"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, ps := Parse(tc.file, []byte(tc.doc), nil)
			if m != nil || len(ps) != 1 || ps[0].Path != tc.path || !strings.Contains(ps[0].Msg, "only in case") {
				t.Fatalf("got %v %q", m, ps)
			}
		})
	}
}

func TestJSONSyntaxErrorsGiveLineAndColumn(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"missing_comma", "{\n  \"manifest_version\": 1\n  \"id\": \"com.a.b\"\n}", `not valid JSON at line 3, column 3: invalid character '"' after object key:value pair`},
		{"truncated", "{\n  \"manifest_version\": 1,", `not valid JSON at line 2, column 25: unexpected end of JSON input`},
		{"trailing_garbage_after_unicode", "{\"id\":\"é\"} x", `not valid JSON at line 1, column 12: invalid character 'x' after top-level value`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, ps := Parse(SollarFile, []byte(tc.doc), nil)
			if m != nil || ps.Error() != tc.want {
				t.Fatalf("\n got: %q\nwant: %q", ps.Error(), tc.want)
			}
		})
	}
}

// TestOtherFormatNetworkKeyInAnySpellingEgressdFoldsIsRefused spells the
// other format's network key with every rune egressd's own key folding
// takes for one of its letters (dotless ı, dotted İ, the Kelvin sign, the
// long s...): a reader that upper-cases keys (Python, JS, Java) reads that
// list, so egressd must refuse it, as it refuses the same spelling beside
// the key in the file's own format.
func TestOtherFormatNetworkKeyInAnySpellingEgressdFoldsIsRefused(t *testing.T) {
	docs := map[Format]struct{ file, key, doc string }{
		Sollar:  {SollarFile, "permissions", `{"manifest_version":1,"id":"com.a.s","version":"1.0.0","network":{"connect":["evil.example.com"]},%q:[{"kind":"network","domains":["good.example.com"]}]}`},
		VoiceOS: {VoiceOSFile, "network", `{"schemaVersion":1,"id":"com.a.v","version":"1.0.0","runtime":{"kind":"hosted"},"permissions":[{"kind":"network","domains":["evil.example.com"]}],%q:{"connect":["good.example.com"]}}`},
	}
	for f, d := range docs {
		spellings := spellingsFoldingTo(d.key)
		if f == Sollar && !containsAll(spellings, "permıssions", "permİssions", "PERMISSIONS") {
			t.Fatalf("the spellings miss the ones the review used: %q", spellings)
		}
		for _, k := range spellings {
			m, ps := Parse(d.file, []byte(fmt.Sprintf(d.doc, k)), nil)
			if m != nil || !strings.Contains(ps.Error(), "network key in a "+f.String()) {
				t.Errorf("%s with key %q: loaded %v, problems %q", d.file, k, m, ps.Error())
			}
		}
	}
}

// spellingsFoldingTo returns key in upper case and every spelling of key
// with one letter swapped for another rune foldKey takes for it.
func spellingsFoldingTo(key string) []string {
	takenFor := map[string][]rune{} // a letter's fold -> every rune with that fold
	// Every rune a case mapping or fold moves is in unicode.CaseRanges (the
	// table ToUpper, ToLower and SimpleFold read); any other folds to
	// itself, so is taken for a letter of key only if it is that letter.
	for _, cr := range unicode.CaseRanges {
		for r := rune(cr.Lo); r <= rune(cr.Hi); r++ {
			if f := foldKey(string(r)); strings.Contains(foldKey(key), f) && !slices.Contains(takenFor[f], r) {
				takenFor[f] = append(takenFor[f], r)
			}
		}
	}
	out := []string{strings.ToUpper(key)}
	for i, c := range key {
		for _, r := range takenFor[foldKey(string(c))] {
			if r != c {
				out = append(out, key[:i]+string(r)+key[i+1:])
			}
		}
	}
	return out
}

func containsAll(list []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(list, w) {
			return false
		}
	}
	return true
}
