package proxy

import (
	"strings"
	"testing"
	"unicode/utf16"
)

// Round 45: decodings common servers apply before an application shows a
// field back, each of which carried a guess list past the guard.

// guessKey is a key of the sk_live_ form, holding '_' and '+'.
const guessKey = "sk_live_Q7fZ93+kLmA2x"

// utf16LE encodes s as UTF-16LE, no BOM.
func utf16LE(s string) string {
	var b strings.Builder
	for _, u := range utf16.Encode([]rune(s)) {
		b.WriteByte(byte(u))
		b.WriteByte(byte(u >> 8))
	}
	return b.String()
}

// wantGuessedPost posts body with Content-Type ct, and fails unless it is
// refused 403 secret_guessed before the origin has it whole.
func wantGuessedPost(t *testing.T, h2 bool, what, ct, body string) {
	t.Helper()
	o := newBodyRecorder(t)
	b := newBrokerEnv(t, h2, o.handle, func(e *env) { e.secrets = valueSecrets(t, guessKey) })
	req := mustRequest(t, "POST", b.url("api.allowed.example", "/v1/notes"), body)
	req.Header.Set("Content-Type", ct)
	resp, answer := do(t, b.client(h2), req)
	wantGuessed(t, what, resp, answer)
	if o.saw("") {
		t.Fatalf("%s: the origin received the whole body", what)
	}
}

// TestGuessesWrittenInEscapesOriginsDecodeAreFound: a JSON body in UTF-16
// or UTF-32 (Python's json.loads guesses the encoding from the NULs,
// whatever the Content-Type), PHP's names ('.', ' ', '[' read as '_'),
// CGI.pm's %uXXXX, JSON's \uXXXX and HTML's &#NNN; each made the key out
// of bytes the guard read as no value.
func TestGuessesWrittenInEscapesOriginsDecodeAreFound(t *testing.T) {
	php := strings.NewReplacer("_", ".", "+", "%2B").Replace(guessKey) // a '+' is a space, then '_', to PHP
	for _, c := range []struct{ what, ct, body string }{
		{"UTF-16 JSON", "application/json", utf16LE(`{"q":["sk_live_AAAA","` + guessKey + `"]}`)},
		{"UTF-16 JSON labelled binary", "application/octet-stream", utf16LE(`{"q":"` + guessKey + `"}`)},
		{"PHP names in a form", "application/x-www-form-urlencoded", "a=1&" + php + "=2"},
		{"PHP names with a space and a bracket", "application/x-www-form-urlencoded", "sk+live[Q7fZ93%2BkLmA2x=1"},
		{"CGI.pm %u escapes", "application/x-www-form-urlencoded", "g=%u0073%u006b" + guessKey[2:]},
		{"JSON \\u escapes", "application/json", `{"q":"\u0073\u006b` + guessKey[2:] + `"}`},
		{"HTML numeric references", "text/html", "<p>&#115;&#x6b;" + guessKey[2:] + "</p>"},
	} {
		for _, h2 := range []bool{false, true} {
			wantGuessedPost(t, h2, c.what, c.ct, c.body)
		}
	}
	for _, h2 := range []bool{false, true} {
		for _, cookie := range []string{php + "=1", "g=%u0073%u006b" + strings.ReplaceAll(guessKey[2:], "+", "%2B")} {
			b := newBrokerEnv(t, h2, namesEcho, func(e *env) { e.secrets = valueSecrets(t, guessKey) })
			req := mustRequest(t, "GET", b.url("api.allowed.example", "/v1/me"), "")
			req.Header.Set("Cookie", cookie)
			resp, answer := do(t, b.client(h2), req)
			wantGuessed(t, "a cookie "+cookie, resp, answer)
		}
	}
}
