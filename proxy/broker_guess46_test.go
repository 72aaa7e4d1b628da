package proxy

import (
	"fmt"
	"strings"
	"testing"
)

// Round 46: a view that decoded every escape syntax at once lost the
// start of a guess behind a '%' or "&#x" a JSON parser keeps as text, and
// the chains real stacks apply (GraphQL variables, cookie-parser's JSON
// cookies, secure_filename's NFKD) were not read.
func TestGuessesBehindDecodingsStacksChainAreFound(t *testing.T) {
	hexKey := "ab12cd34ef56ab78cd90ef12ab34cd56"
	last := func(s string) string { return s[:len(s)-1] + fmt.Sprintf(`\u%04x`, s[len(s)-1]) }
	for _, c := range []struct{ what, key, ct, body string }{
		{"a '%' before a hex key in JSON", hexKey, "application/json", `{"q":["%` + last(hexKey) + `"]}`},
		{"'&#x' before a hex key in JSON", hexKey, "application/json", `{"q":["&#x` + last(hexKey) + `"]}`},
		{"GraphQL variables in a form", guessKey, "application/x-www-form-urlencoded", "query=q&variables=" + strings.ReplaceAll(`{"g":"`+last(guessKey)+`"}`, `\`, "%5C")},
		{"JSON inside a JSON string", guessKey, "application/json", `{"variables":"{\"g\":\"` + strings.ReplaceAll(last(guessKey), `\`, `\\`) + `\"}"}`},
		{"a fullwidth letter in a filename*", "sk_live_Q7fZ93kLmA2x", "multipart/form-data; boundary=XB", // secure_filename keeps only [A-Za-z0-9_.-]
			"--XB\r\nContent-Disposition: form-data; name=\"f\"; filename*=utf-8''%EF%BD%93k_live_Q7fZ93kLmA2x\r\n\r\nx\r\n--XB--\r\n"},
	} {
		wantGuessedPosts(t, c.key, c.what, c.ct, c.body)
	}
	// cookie-parser: "j:" and JSON, percent-encoded.
	for _, h2 := range []bool{false, true} {
		b := newBrokerEnv(t, h2, namesEcho, func(e *env) { e.secrets = valueSecrets(t, guessKey) })
		req := mustRequest(t, "GET", b.url("api.allowed.example", "/v1/me"), "")
		req.Header.Set("Cookie", "prefs=j%3A%5B%22"+strings.ReplaceAll(strings.ReplaceAll(last(guessKey), `\`, "%5C"), "+", "%2B")+"%22%5D")
		resp, answer := do(t, b.client(h2), req)
		wantGuessed(t, "a JSON cookie", resp, answer)
	}
}

// TestGuessesTheViewsReadUnlikeTheirParsersAreFound: round 47. The '&'
// view gave "&#1;" inside a guess as U+0001, which Python's html.unescape
// drops; the '%' view read "%u" and four hex digits as one character,
// which Werkzeug keeps as text; and the secure_filename view kept the
// ASCII bytes that function strips ('!').
func TestGuessesTheViewsReadUnlikeTheirParsersAreFound(t *testing.T) {
	const key = "sk-live-Q7fZ93kLmA2x"
	const b64 = "be3fK9q2+Zx1"
	for _, c := range []struct{ what, key, ct, body string }{
		{"a control reference inside a guess", key, "text/html", "<p>s&#1;" + key[1:] + "</p>"},
		{"'%u' before a value of hex digits", b64, "multipart/form-data; boundary=XB",
			"--XB\r\nContent-Disposition: form-data; name=\"f\"; filename*=utf-8''%u" + b64[:5] + "%39" + strings.ReplaceAll(b64[6:], "+", "%2B") + "\r\n\r\nx\r\n--XB--\r\n"},
		{"a '!' secure_filename strips", key, "multipart/form-data; boundary=XB",
			"--XB\r\nContent-Disposition: form-data; name=\"f\"; filename=\"s!" + key[1:] + "\"\r\n\r\nx\r\n--XB--\r\n"},
	} {
		wantGuessedPosts(t, c.key, c.what, c.ct, c.body)
	}
}

// wantGuessedPosts posts body with Content-Type ct to a bound host whose
// secret's value is key, over HTTP/1.1 and HTTP/2, and fails unless each
// is refused 403 secret_guessed.
func wantGuessedPosts(t *testing.T, key, what, ct, body string) {
	t.Helper()
	for _, h2 := range []bool{false, true} {
		o := newBodyRecorder(t)
		b := newBrokerEnv(t, h2, o.handle, func(e *env) { e.secrets = valueSecrets(t, key) })
		req := mustRequest(t, "POST", b.url("api.allowed.example", "/v1/notes"), body)
		req.Header.Set("Content-Type", ct)
		resp, answer := do(t, b.client(h2), req)
		wantGuessed(t, what, resp, answer)
	}
}

// TestGuessesBehindAReferenceTheViewMisreadAreFound: round 49. The '&'
// view read "&#0x3" as a hex reference (html.unescape reads "&#0", then
// 'x' as text) and skipped a NUL inside "&#x" NUL "3" (a NUL ends it):
// each swallowed a hex key's first digit.
func TestGuessesBehindAReferenceTheViewMisreadAreFound(t *testing.T) {
	const key = "3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e"
	rest := fmt.Sprintf("&#%d;", key[1]) + key[2:]
	for _, c := range []struct{ what, body string }{
		{"&#0x", "<li>&#0x" + key[:1] + rest + "</li>"},
		{"a NUL after &#x", "<li>&#x\x00" + key[:1] + rest + "</li>"},
	} {
		wantGuessedPosts(t, key, c.what, "text/html", c.body)
	}
}

// TestAnXMLBodyDeclaringEntitiesIsRefused: round 50. A document's own
// entities (<!DOCTYPE r [<!ENTITY 甲 "s">]>, each character of a guess
// written &甲;) are expanded by its parser (xml.etree, lxml, Java's), and
// no view reads them: a guess list came back decoded. A body declaring an
// entity is refused 400, in UTF-16 too.
func TestAnXMLBodyDeclaringEntitiesIsRefused(t *testing.T) {
	doc := `<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "s">]><r>&a;k</r>`
	for _, h2 := range []bool{false, true} {
		wantRefusedBody(t, h2, "an internal entity", "application/xml", doc)
		wantRefusedBody(t, h2, "an internal entity in UTF-16", "application/xml", utf16LE(doc))
	}
}
