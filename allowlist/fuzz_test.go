package allowlist

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
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

// FuzzParse drives the whole manifest parser with the file name as an input
// too: no panic; a manifest that loads has only canonical entries; its
// format is the one its file name says; and no document holding two keys
// that differ only in case (strings.EqualFold, checked here independently of
// the parser's folding), a key holding a control character, or the other
// format's network key ever loads.
func FuzzParse(f *testing.F) {
	f.Add(VoiceOSFile, []byte(smallestVoiceOS))
	f.Add(VoiceOSFile, []byte(voiceos(`[{"kind":"network","domains":["a.example.com","*.b.example.com"]}]`)))
	f.Add(SollarFile, []byte(`{"manifest_version":1,"id":"com.acme.erp","version":"2.4.1","network":{"connect":["erp.acme.example","*.cdn.acme.example"]}}`))
	f.Add("x.json", []byte(`{"a":{"a":1,"a":2}}`))
	f.Add(SollarFile, []byte(sollarWithVoiceOSKeys))
	f.Add("x.json", []byte(sollarWithVoiceOSKeys))
	f.Add(SollarFile, []byte(`{"manifest_version":1,"id":"com.a.b","version":"1.0.0","network":{"connect":["a.example.com"]},"Network":{"connect":["evil.example"]}}`))
	f.Add(VoiceOSFile, []byte(voiceos(`[{"kind":"network","domains":["a.example.com"]}],"PERMISSIONS":[{"kind":"network","domains":["evil.example"]}]`)))
	f.Add("dir/"+VoiceOSFile, []byte(voiceos(`[{"\u212Aind":"network","kind":"network","domains":[]}]`)))
	f.Add(SollarFile, []byte(`{"manifest_version":1,"id":"com.a.b","version":"1.0.0","network":{"connect":["a.example.com"]},"network\u0000":{"connect":["evil.example"]}}`))
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
		switch filepath.Base(name) {
		case VoiceOSFile:
			if m.Format != VoiceOS {
				t.Fatalf("%s read as %s", name, m.Format)
			}
		case SollarFile:
			if m.Format != Sollar {
				t.Fatalf("%s read as %s", name, m.Format)
			}
		}
		if a, b := equalFoldKeys(t, data); a != "" {
			t.Fatalf("loaded with keys %q and %q in one object", a, b)
		}
		var top map[string]json.RawMessage
		json.Unmarshal(data, &top)
		for k := range top {
			if strings.EqualFold(k, networkKeys[otherFormat(m.Format)]) {
				t.Fatalf("%s manifest loaded with the other format's key %q", m.Format, k)
			}
		}
	})
}

func otherFormat(f Format) Format {
	if f == VoiceOS {
		return Sollar
	}
	return VoiceOS
}

// equalFoldKeys returns two keys of one object that strings.EqualFold calls
// equal, or a key holding a control character and why, or "", "". It
// compares every pair, the slow obvious way.
func equalFoldKeys(t *testing.T, data []byte) (string, string) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var objects [][]string // keys of each open object; nil for an array
	expectKey := func() bool { return len(objects) > 0 && objects[len(objects)-1] != nil }
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", ""
		}
		switch tok {
		case json.Delim('{'):
			objects = append(objects, []string{})
			continue
		case json.Delim('['):
			objects = append(objects, nil)
			continue
		case json.Delim('}'), json.Delim(']'):
			objects = objects[:len(objects)-1]
			continue
		}
		// dec.Token alternates key and value inside an object; a key is a
		// string read where the decoder expects one.
		if k, ok := tok.(string); ok && expectKey() && dec.InputOffset() > 0 && isKeyPosition(data, dec.InputOffset()) {
			if strings.IndexFunc(k, unicode.IsControl) >= 0 {
				return k, "(it holds a control character)"
			}
			keys := objects[len(objects)-1]
			for _, other := range keys {
				if strings.EqualFold(other, k) {
					return other, k
				}
			}
			objects[len(objects)-1] = append(keys, k)
		}
	}
}

// isKeyPosition reports whether the token that ended at off is followed by
// a colon, which only a key is.
func isKeyPosition(data []byte, off int64) bool {
	rest := bytes.TrimLeft(data[off:], " \t\r\n")
	return len(rest) > 0 && rest[0] == ':'
}
