package allowlist

import (
	"strings"
	"testing"
)

func TestSuggest(t *testing.T) {
	cases := []struct {
		name          string
		hosts         []string
		want, skipped string
	}{
		{"exact_hosts", []string{"api.x.example", "auth.y.example"}, "api.x.example auth.y.example", ""},
		{"two_siblings_stay_exact", []string{"a.cdn.x.example", "b.cdn.x.example"}, "a.cdn.x.example b.cdn.x.example", ""},
		{"three_siblings_stay_exact", []string{"a.cdn.x.example", "b.cdn.x.example", "c.cdn.x.example", "api.x.example"}, "a.cdn.x.example api.x.example b.cdn.x.example c.cdn.x.example", ""},
		{"shared_hosting_stays_exact", []string{"b1.storage.googleapis.com", "b2.storage.googleapis.com", "b3.storage.googleapis.com"}, "b1.storage.googleapis.com b2.storage.googleapis.com b3.storage.googleapis.com", ""},
		{"no_wildcard_over_public_suffix", []string{"a.github.io", "b.github.io", "c.github.io"}, "a.github.io b.github.io c.github.io", ""},
		{"no_wildcard_over_tld", []string{"a.example", "b.example", "c.example"}, "a.example b.example c.example", ""},
		{"invalid_hosts_skipped", []string{"api.x.example", "localhost", "10-0-0-1.nip.io"}, "api.x.example", "localhost 10-0-0-1.nip.io"},
		{"duplicates_once", []string{"api.x.example", "api.x.example"}, "api.x.example", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, skipped := Suggest(tc.hosts, nil)
			if strings.Join(got, " ") != tc.want || strings.Join(skipped, " ") != tc.skipped {
				t.Fatalf("got %q skipped %q", got, skipped)
			}
		})
	}
	// Where a wildcard might do, it is named apart, never over a public
	// suffix or a TLD.
	if got := Siblings([]string{"a.cdn.x.example", "b.cdn.x.example", "c.cdn.x.example", "a.github.io", "b.github.io", "c.github.io", "a.example", "b.example", "c.example"}, nil); strings.Join(got, " ") != "*.cdn.x.example" {
		t.Fatalf("Siblings: %q", got)
	}
}

func TestSuggestionPassesCheck(t *testing.T) {
	entries, _ := Suggest([]string{"a.cdn.x.example", "b.cdn.x.example", "c.cdn.x.example", "api.x.example"}, nil)
	for _, f := range []Format{VoiceOS, Sollar} {
		frag, err := NetworkFragment(f, entries)
		if err != nil {
			t.Fatal(err)
		}
		doc := `{"schemaVersion":1,"id":"com.x.y","version":"1.0.0","runtime":{"kind":"hosted"},"permissions":[` + string(frag) + `]}`
		name := VoiceOSFile
		if f == Sollar {
			doc = `{"manifest_version":1,"id":"com.x.y","version":"1.0.0",` + strings.TrimSuffix(strings.TrimPrefix(string(frag), "{"), "}") + `}`
			name = SollarFile
		}
		m, ps := Parse(name, []byte(doc), nil)
		if m == nil || len(ps) != 0 || len(m.Entries) != 4 {
			t.Fatalf("%s fragment does not pass check: %v\n%s", f, ps, doc)
		}
	}
}
