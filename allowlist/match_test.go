package allowlist

import (
	"fmt"
	"testing"
)

func mustEntries(t testing.TB, ss ...string) []Entry {
	t.Helper()
	var es []Entry
	for _, s := range ss {
		e, _, err := ParseEntry(s)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	return es
}

func mustWire(t testing.TB, s string) Name {
	t.Helper()
	n, err := ParseWireHost(s, HostForm)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMatcher(t *testing.T) {
	m := Compile(mustEntries(t, "erp.acme.example", "*.cdn.acme.example", "api.elevenlabs.io"))
	cases := []struct {
		name, host, rule string
	}{
		{"exact_match", "erp.acme.example", "erp.acme.example"},
		{"exact_match_upper_case", "ERP.ACME.EXAMPLE", "erp.acme.example"},
		{"exact_match_trailing_dot", "erp.acme.example.", "erp.acme.example"},
		{"wildcard_one_label", "img.cdn.acme.example", "*.cdn.acme.example"},
		{"wildcard_does_not_match_apex", "cdn.acme.example", ""},
		{"wildcard_two_labels_deep", "a.b.cdn.acme.example", ""},
		{"suffix_trick_allowed_prefix", "erp.acme.example.evil.example", ""},
		{"suffix_trick_glued_label", "evilerp.acme.example", ""},
		{"suffix_trick_glued_wildcard", "xcdn.acme.example", ""},
		{"sibling_not_listed", "www.acme.example", ""},
		{"parent_not_listed", "acme.example", ""},
		{"child_of_exact_not_listed", "x.erp.acme.example", ""},
		{"seed_voiceos", "api.elevenlabs.io", "api.elevenlabs.io"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, ok := m.Match(mustWire(t, tc.host))
			if ok != (tc.rule != "") || (ok && e.String() != tc.rule) {
				t.Fatalf("Match(%q) = %q, %v; want %q", tc.host, e, ok, tc.rule)
			}
		})
	}
}

func TestZeroMatcherMatchesNothing(t *testing.T) {
	var m *Matcher
	if _, ok := m.Match(mustWire(t, "a.example")); ok {
		t.Fatal("nil matcher matched")
	}
	if _, ok := Compile(nil).Match(Name{}); ok {
		t.Fatal("zero name matched")
	}
}

func TestMatchAllocatesNothing(t *testing.T) {
	m := Compile(mustEntries(t, "erp.acme.example", "*.cdn.acme.example"))
	hit, wild, miss := mustWire(t, "erp.acme.example"), mustWire(t, "a.cdn.acme.example"), mustWire(t, "x.y.example")
	allocs := testing.AllocsPerRun(1000, func() {
		m.Match(hit)
		m.Match(wild)
		m.Match(miss)
	})
	if allocs != 0 {
		t.Fatalf("Match allocates %v per run, want 0", allocs)
	}
}

func syntheticEntries(tb testing.TB, n int) []Entry {
	es := make([]Entry, 0, n)
	for i := 0; i < n; i++ {
		s := fmt.Sprintf("h%d.svc%d.example.com", i, i%97)
		if i%2 == 1 {
			s = fmt.Sprintf("*.c%d.example.com", i)
		}
		es = append(es, mustEntries(tb, s)...)
	}
	return es
}

// TestMatcherAgreesWithReference checks the maps against Entry.Matches over
// every entry, the obviously correct linear scan.
func TestMatcherAgreesWithReference(t *testing.T) {
	es := syntheticEntries(t, 200)
	m := Compile(es)
	for _, h := range []string{"h0.svc0.example.com", "x.c1.example.com", "c1.example.com", "a.b.c3.example.com", "h2.svc2.example.com", "h2.svc3.example.com"} {
		n := mustWire(t, h)
		_, got := m.Match(n)
		want := false
		for _, e := range es {
			want = want || e.Matches(n)
		}
		if got != want {
			t.Errorf("Match(%q) = %v, reference says %v", h, got, want)
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		m := Compile(syntheticEntries(b, n))
		hosts := []Name{mustWire(b, fmt.Sprintf("h%d.svc%d.example.com", n-2, (n-2)%97)), mustWire(b, fmt.Sprintf("x.c%d.example.com", n-1)), mustWire(b, "nothere.example.org")}
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				m.Match(hosts[i%3])
			}
		})
	}
}
