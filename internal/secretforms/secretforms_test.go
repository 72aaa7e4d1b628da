package secretforms

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"testing"
)

// TestEveryEncodingOfTheValueHoldsOneOfItsForms: whatever surrounds the
// value, its URL escapings and its base64 encodings (each alignment, both
// alphabets, padded or not) contain a listed form, and each form says how.
func TestEveryEncodingOfTheValueHoldsOneOfItsForms(t *testing.T) {
	v := []byte("sk-live/A15+secret=9f3c2a7e51\x00\xff")
	forms := Forms(v)
	holds := func(s, how string) bool {
		for _, f := range forms {
			if f.How == how && bytes.Contains([]byte(s), f.Bytes) {
				return true
			}
		}
		return false
	}
	for _, s := range []string{url.QueryEscape(string(v)), url.PathEscape(string(v)), (&url.URL{User: url.UserPassword("u", string(v))}).String()} {
		if !holds("x"+s+"y", PercentEncoded) {
			t.Errorf("no form in %q", s)
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		for _, pre := range []string{"", "u", "u:", "use"} {
			for _, post := range []string{"", "!", "!!"} {
				s := enc.EncodeToString(append(append([]byte(pre), v...), post...))
				if !holds(s, Base64Encoded) {
					t.Errorf("no form in %q", s)
				}
			}
		}
	}
}

// TestShortValueIsListedOnlyVerbatimAndEscaped: a 4-byte value's base64
// pieces are under MinBase64Piece and left out; the value is not.
func TestShortValueIsListedOnlyVerbatimAndEscaped(t *testing.T) {
	for _, f := range Forms([]byte("a/bc")) {
		if f.How == Base64Encoded {
			t.Errorf("short piece %q listed", f.Bytes)
		}
	}
	if f := Forms([]byte("a/bc")); len(f) == 0 || string(f[0].Bytes) != "a/bc" || f[0].How != Verbatim {
		t.Fatalf("forms = %v", f)
	}
	if Forms(nil) != nil {
		t.Fatal("an empty value has forms")
	}
}
