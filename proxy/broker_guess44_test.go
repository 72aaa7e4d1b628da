package proxy

import (
	"fmt"
	"strings"
	"testing"
)

// Round 44: parsers that decode what the program wrote in ways the guard
// did not read. Each guess list reached an origin that showed it back.

// escapedEach writes every character of s as format gives it.
func escapedEach(s, format string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, format, s[i])
	}
	return b.String()
}

// TestEscapesInAPartHeaderAreRefused: Python's email (policy default)
// drops a backslash before any character of a quoted parameter, so
// filename="\w\i\n…" was the value to it; formidable decodes &#NNNN; in
// a filename. A part header holding a backslash or "&#" is refused 400.
func TestEscapesInAPartHeaderAreRefused(t *testing.T) {
	for _, c := range []struct{ what, filename string }{
		{"a backslash before every character", escapedEach(guessPlus, `\%c`)},
		{"formidable's numeric entities", "a&#0098;c.txt"}, // a value so written is a guess to the escape view (round 45)
	} {
		body := "--XB\r\nContent-Disposition: form-data; name=\"f\"; filename=\"" + c.filename + "\"\r\n\r\nx\r\n--XB--\r\n"
		for _, h2 := range []bool{false, true} {
			wantRefusedBody(t, h2, c.what, "multipart/form-data; boundary=XB", body)
		}
	}
}

// TestAValueWithAPlusPercentEncodedInPartIsFound: the value holds a '+';
// written with its first character percent-encoded and the '+' raw, it
// was in neither the raw bytes nor the form view ('+' a space), and a
// plain percent-decoder (Rack's filename, RFC 2231's filename*=) gave it
// back whole. The body is read percent-decoded with '+' kept too.
func TestAValueWithAPlusPercentEncodedInPartIsFound(t *testing.T) {
	written := "%" + fmt.Sprintf("%02X", guessPlus[0]) + guessPlus[1:]
	for _, c := range []struct{ what, ct, body string }{
		{"a text body", "text/plain", "guesses: " + written + "\n"},
		{"a filename*", "multipart/form-data; boundary=XB", "--XB\r\nContent-Disposition: form-data; name=\"f\"; filename*=utf-8''" + written + "\r\n\r\nx\r\n--XB--\r\n"},
	} {
		for _, h2 := range []bool{false, true} {
			o := newBodyRecorder(t)
			b := newBrokerEnv(t, h2, o.handle, func(e *env) { e.secrets = plusSecrets(t) })
			req := mustRequest(t, "POST", b.url("api.allowed.example", "/v1/notes"), c.body)
			req.Header.Set("Content-Type", c.ct)
			resp, answer := do(t, b.client(h2), req)
			wantGuessed(t, c.what, resp, answer)
			if o.saw("") {
				t.Fatalf("%s: the origin received the whole body", c.what)
			}
		}
	}
}

// TestACookieTheOriginDecodesIsRead: Werkzeug and Python's http.cookies
// decode octal escapes in a quoted cookie value (g="\167\151…"): a
// backslash, which no RFC 6265 cookie value holds, is refused 400. Rack
// form-decodes cookie values (g=%77inter%2B2019): header values are read
// percent-decoded and form-decoded too, as the request target is.
func TestACookieTheOriginDecodesIsRead(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		b := newBrokerEnv(t, h2, namesEcho, func(e *env) { e.secrets = plusSecrets(t) })
		req := mustRequest(t, "GET", b.url("api.allowed.example", "/v1/me"), "")
		req.Header.Set("Cookie", `g="`+escapedEach(guessPlus, `\%03o`)+`"`)
		resp, answer := do(t, b.client(h2), req)
		wantBadRequest(t, "octal escapes in a cookie", resp, answer)

		for _, cookie := range []string{"g=" + escapedEach(guessPlus, "%%%02X"), "g=%77inter%2B2019"} {
			b := newBrokerEnv(t, h2, namesEcho, func(e *env) { e.secrets = plusSecrets(t) }) // not quarantined by the last
			req := mustRequest(t, "GET", b.url("api.allowed.example", "/v1/me"), "")
			req.Header.Set("Cookie", cookie)
			resp, answer := do(t, b.client(h2), req)
			wantGuessed(t, "a percent-encoded cookie "+cookie, resp, answer)
		}
	}
}
