package broker

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/egressd/egressd/policy"
)

// TestABasicTokenWithThePlaceholderAlsoRawAfterItDoesNotCarryTheValueRebased:
// the raw placeholder was substituted first, then the whole token, now
// "U"+value, decoded leniently (URL alphabet, no padding) and re-encoded
// in the standard one: the origin received the value with every '-' as
// '+' (and '_' as '/'), a form no scrubber pattern covered once the built
// token was forgotten, and got it back to the program whole (round 15
// broker attacker). A Basic credential is decoded from what the
// integration wrote, so the value enters it only through the encoding.
func TestABasicTokenWithThePlaceholderAlsoRawAfterItDoesNotCarryTheValueRebased(t *testing.T) {
	const value = "sk-live-DISTINCT-9f3c2a7e51-abcd_fg" // as long as the placeholder, as egressd makes them
	a := secret(t, "A", "a.example", phA, value)
	prefix := "u:" + phA
	for len(prefix)%3 != 0 {
		prefix += "x"
	}
	u := base64.RawURLEncoding.EncodeToString([]byte(prefix))
	h := http.Header{"Authorization": {"Basic " + u + phA}}
	substituteHeaders(h, []policy.Secret{a})
	got := h.Get("Authorization")
	rebased := strings.NewReplacer("-", "+", "_", "/").Replace(value)
	for _, form := range []string{value, rebased} {
		if strings.Contains(got, form) {
			t.Fatalf("the header sent to the origin holds the value as %q: %q", form, got)
		}
	}
}

// TestAnotherHostsPlaceholderInABasicTokenAfterATabIsMisdirected: Python's
// split() takes "Basic\t<token>" as a Basic credential; the misdirection
// check read only a space after the scheme, so another host's placeholder
// encoded there was forwarded unaudited.
func TestAnotherHostsPlaceholderInABasicTokenAfterATabIsMisdirected(t *testing.T) {
	other := secret(t, "B", "b.example", phA, "sk-live-other-0123456789-abcdefghij")
	h := http.Header{"Authorization": {"Basic\t" + base64.StdEncoding.EncodeToString([]byte("u:"+phA))}}
	if !misdirected("GET /", h, []policy.Secret{other}) {
		t.Fatal("another host's placeholder in a Basic token after a tab was not misdirected")
	}
}

// TestAnotherHostsPlaceholderInABasicTokenAnyOriginFindsIsMisdirected:
// the check decoded a token only after "Basic" and a space or a tab;
// "Basic<token>", "Basic\xa0<token>", "Basic,<token>" and a token later in
// a list of credentials reached the origin, which a lenient parser decodes
// (round 17 broker attacker, LOW).
func TestAnotherHostsPlaceholderInABasicTokenAnyOriginFindsIsMisdirected(t *testing.T) {
	other := secret(t, "B", "b.example", phA, "sk-live-other-0123456789-abcdefghij")
	tok := base64.StdEncoding.EncodeToString([]byte("u:" + phA))
	for _, v := range []string{"Basic" + tok, "Basic\xa0" + tok, "Basic," + tok, "Bearer x, Basic " + tok, "Basic dTpw, Basic " + tok, "basic\u00a0" + base64.RawURLEncoding.EncodeToString([]byte("u:"+phA))} {
		if !misdirected("GET /", http.Header{"Authorization": {v}}, []policy.Secret{other}) {
			t.Errorf("%q: another host's placeholder in a Basic token was not misdirected", v)
		}
	}
}

// TestAPlaceholderInACookieIsRefusedWhenItsValueHoldsASemicolon: an HTTP/2
// client cuts a Cookie at ';', and the origin joins the pieces with "; ":
// a value "sk-live;DISTINCT" came back as "sk-live; DISTINCT", which the
// scrubber did not look for (round 19 broker attacker, LOW).
func TestAPlaceholderInACookieIsRefusedWhenItsValueHoldsASemicolon(t *testing.T) {
	semi := secret(t, "A", "a.example", phA, "sk-live;DISTINCT-9f3c2a7e51")
	plain := secret(t, "A", "a.example", phA, "sk-live-DISTINCT-9f3c2a7e51")
	h := http.Header{"Cookie": {"session=" + phA}}
	if !cookieSplit(h, []policy.Secret{semi}) {
		t.Error("a Cookie carrying the placeholder of a value with ';' is not refused")
	}
	if cookieSplit(h, []policy.Secret{plain}) || cookieSplit(http.Header{"X-Key": {phA}}, []policy.Secret{semi}) {
		t.Error("refused a Cookie of a value with no ';', or another field")
	}
}
