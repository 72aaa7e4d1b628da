package allowlist

import (
	"errors"
	"testing"
)

// FuzzParseWireHost checks that wire parsing never panics, is idempotent on
// its own output, and never yields something ParseEntry would call an IP.
func FuzzParseWireHost(f *testing.F) {
	for _, s := range []string{"api.example.com", "API.example.com.", "127.0.0.1", "0x7f.1", "[::1]", "%31", "①.com", "a..b", "xn--bcher-kva.example", "a-.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseWireHost(s, HostForm)
		if err != nil {
			return
		}
		again, err := ParseWireHost(n.String(), SNIForm)
		if err != nil || again != n {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v", s, n, again, err)
		}
		if isIPAddress(n.String()) || endsInNumber(n.String()) {
			t.Fatalf("%q parsed to IP-looking %q", s, n)
		}
	})
}

// FuzzParseEntry checks that entry parsing never panics, that its output
// parses to itself, and that the wire parser agrees on the base name.
func FuzzParseEntry(f *testing.F) {
	for _, s := range []string{"api.elevenlabs.io", "*.cdn.acme.example", "*.co.uk", "bücher.example", "１２７.０.０.１", "10-0-0-1.nip.io", "https://a.b", "*.*.a.b", "a.b:443"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, _, err := ParseEntry(s)
		if err != nil {
			return
		}
		again, warn, err := ParseEntry(e.String())
		if err != nil || again != e || len(warn) != 0 {
			t.Fatalf("not idempotent: %q -> %q -> %q, %v %v", s, e, again, warn, err)
		}
		w, err := ParseWireHost(e.Base.String(), HostForm)
		if err != nil && !errors.Is(err, ErrIPLiteral) {
			t.Fatalf("entry base %q refused on the wire: %v", e.Base, err)
		}
		if err == nil && w != e.Base {
			t.Fatalf("entry base %q != wire %q", e.Base, w)
		}
	})
}

// FuzzParse drives the whole manifest parser: no panic, and a manifest that
// loads has only canonical entries.
func FuzzParse(f *testing.F) {
	f.Add(VoiceOSFile, []byte(smallestVoiceOS))
	f.Add(VoiceOSFile, []byte(voiceos(`[{"kind":"network","domains":["a.example.com","*.b.example.com"]}]`)))
	f.Add(SollarFile, []byte(`{"manifest_version":1,"id":"com.acme.erp","version":"2.4.1","network":{"connect":["erp.acme.example","*.cdn.acme.example"]}}`))
	f.Add("x.json", []byte(`{"a":{"a":1,"a":2}}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		m, ps := Parse(name, data, nil)
		if (m == nil) != ps.HasErrors() {
			t.Fatalf("manifest %v with problems %v", m, ps)
		}
		if m == nil {
			return
		}
		for _, e := range m.Entries {
			if again, _, err := ParseEntry(e.String()); err != nil || again != e {
				t.Fatalf("entry %q does not re-parse: %v", e, err)
			}
		}
	})
}
