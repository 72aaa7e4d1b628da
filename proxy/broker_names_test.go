package proxy

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
)

// nameEchoHandler reflects the credentials it received into header NAMES:
// a 103 Early Hints field, a response field, a declared trailer and an
// undeclared one, each carrying the bearer value, its base64, or the
// Basic token egressd built (with its padding cut, as a name cannot hold
// '='). net/http canonicalises the names (HTTP/1.1) or lowercases them
// (HTTP/2) on the way, so the value arrives in another case.
func nameEchoHandler(w http.ResponseWriter, r *http.Request) {
	bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	b64 := base64.RawURLEncoding.EncodeToString([]byte(bearer))
	basic := strings.TrimRight(strings.TrimPrefix(r.Header.Get("Proxy-Authorization-Like"), "Basic "), "=")
	w.Header().Set("X-Hint-"+bearer, "1")
	w.WriteHeader(http.StatusEarlyHints)
	w.Header().Del("X-Hint-" + bearer)
	w.Header().Set("Trailer", "X-Declared-"+bearer)
	w.Header().Set("X-R-"+bearer, "1")
	w.Header().Set("X-B64-"+b64, "1")
	w.Header().Set("X-Basic-"+basic, "1")
	w.Header().Set("X-Echo", r.Header.Get("Authorization"))
	w.WriteHeader(200)
	io.WriteString(w, "ok")
	w.Header().Set("X-Declared-"+bearer, "1")
	w.Header().Set(http.TrailerPrefix+"X-Undeclared-"+b64, "1")
}

// valueForms are the forms of TOKEN's value nameEchoHandler reflects, in
// lower case: the value, its base64, and the part of the Basic token that
// only the value's bits decide.
func valueForms() []string {
	token := base64.StdEncoding.EncodeToString([]byte("user:" + tokenValue))
	token = strings.TrimRight(token, "=")
	return []string{
		strings.ToLower(tokenValue),
		strings.ToLower(base64.RawURLEncoding.EncodeToString([]byte(tokenValue))),
		strings.ToLower(token[8 : len(token)-2]),
	}
}

// TestBrokerOriginReflectingTheValueIntoHeaderNamesDoesNotHandItBack is
// issue 15's seventh review, finding 1: the scrubber rewrote header
// VALUES only, so a bound origin that put the credential in a header
// name, a trailer name or a 103 Early Hints name handed it to the program
// (in canonical case: enough to read a key back). No name reaches the
// program carrying the value in any case, in any form the value scrub
// covers; the rest of the response is relayed.
func TestBrokerOriginReflectingTheValueIntoHeaderNamesDoesNotHandItBack(t *testing.T) {
	for _, h2Origin := range []bool{false, true} {
		b := newBrokerEnv(t, h2Origin, nameEchoHandler)
		for _, h2Client := range []bool{false, true} {
			var got strings.Builder
			req := b.credentialRequest(t, "api.allowed.example")
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					http.Header(h).Write(&got)
					return nil
				},
			}))
			resp, body := do(t, b.client(h2Client), req)
			if resp.StatusCode != 200 || body != "ok" || resp.Header.Get("X-Echo") != "Bearer "+tokenPH {
				t.Fatalf("origin h2=%v client h2=%v: %s %q, X-Echo %q", h2Origin, h2Client, resp.Status, body, resp.Header.Get("X-Echo"))
			}
			if !strings.Contains(b.origin.requests()[0].Header.Get("Authorization"), tokenValue) {
				t.Fatal("the origin did not receive the value: nothing was there to reflect")
			}
			resp.Header.Write(&got)
			resp.Trailer.Write(&got)
			for name := range resp.Trailer { // announced in the head, with or without a value at the end
				got.WriteString(name + "\n")
			}
			for _, form := range valueForms() {
				if strings.Contains(strings.ToLower(got.String()), form) {
					t.Fatalf("origin h2=%v client h2=%v: the program read %q in:\n%s", h2Origin, h2Client, form, got.String())
				}
			}
		}
	}
}
