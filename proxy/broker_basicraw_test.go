package proxy

import (
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/egressd/egressd/policy"
)

// lenientBase64 decodes as Node's Buffer and Python's b64decode do: bytes
// outside either alphabet skipped, padding optional.
func lenientBase64(tok string) []byte {
	var clean strings.Builder
	for _, c := range tok {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
			clean.WriteRune(c)
		case c == '-':
			clean.WriteByte('+')
		case c == '_':
			clean.WriteByte('/')
		}
	}
	s := clean.String()
	if len(s)%4 == 1 {
		s = s[:len(s)-1]
	}
	raw, _ := base64.RawStdEncoding.DecodeString(s)
	return raw
}

// TestBrokerRawPlaceholderWrittenAsTheBasicTokenIsRefused: the integration
// wrote the placeholder itself where a Basic token goes ("Basic A"+ph);
// egressd substituted it as plain text, the origin decoded the VALUE as
// base64 and named the user it could not find in its 401, and the program
// re-encoded those bytes into the whole value (round 16 broker attacker).
// A bound placeholder raw in a Basic credential is refused before
// anything is forwarded: the value enters a Basic token only encoded,
// by egressd.
func TestBrokerRawPlaceholderWrittenAsTheBasicTokenIsRefused(t *testing.T) {
	echoUser := func(w http.ResponseWriter, r *http.Request) {
		_, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		user, _, _ := strings.Cut(string(lenientBase64(strings.TrimSpace(tok))), ":")
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, "unknown user: "+user+"\n")
	}
	padded := tokenPH
	for len(padded)%4 != 0 {
		padded = "A" + padded
	}
	for name, value := range map[string]string{
		"whole token":               "Basic " + padded,
		"bare placeholder":          "Basic " + tokenPH,
		"lower-case scheme, spaces": "basic    " + tokenPH,
		"tab after the scheme":      "Basic\t" + tokenPH,
		"after a well-formed token": "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p")) + tokenPH,
		"in a second credential":    "Bearer x, Basic " + tokenPH,
		"on a second line":          "Basic dTpw\n" + tokenPH, // two Authorization fields, which servers fold into one
		// Round 17: origins take the token after no separator (Node's
		// /^basic/i and a slice), a no-break space or NEL (Python's split,
		// Java's trim).
		"no separator":       "Basic" + tokenPH,
		"NBSP byte":          "Basic\xa0" + tokenPH,
		"NEL byte":           "Basic\x85" + tokenPH,
		"UTF-8 NBSP":         "Basic\u00a0" + tokenPH,
		"upper case, inside": "XBASICX" + tokenPH,
	} {
		for _, h2 := range []bool{false, true} {
			b := newBrokerEnv(t, h2, echoUser)
			req, _ := http.NewRequest("GET", b.url("api.allowed.example", "/v1/me"), nil)
			for _, line := range strings.Split(value, "\n") {
				req.Header.Add("Authorization", line)
			}
			resp, body := do(t, b.client(h2), req)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(ReasonHeader) != string(policy.SecretMisplaced) {
				t.Fatalf("%s (h2=%v): %d %q %q, want 400 secret_misplaced", name, h2, resp.StatusCode, resp.Header.Get(ReasonHeader), body)
			}
			if n := len(b.origin.requests()); n != 0 {
				t.Fatalf("%s (h2=%v): the origin received %d requests", name, h2, n)
			}
			b.log.waitEvent(t, map[string]any{"event": "request", "reason": "secret_misplaced", "decision": "deny", "status": 400})
			noValueIn(t, "the answer", body)
			noValueIn(t, "the audit log", b.log.String())
		}
	}
	// The placeholder encoded inside the credential, as the README says to
	// write it, still has the secret added.
	b := newBrokerEnv(t, false, nil)
	req, _ := http.NewRequest("GET", b.url("api.allowed.example", "/v1/me"), nil)
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:"+tokenPH)))
	if resp, body := do(t, b.client(false), req); resp.StatusCode != 200 {
		t.Fatalf("a well-formed Basic credential: %d %q", resp.StatusCode, body)
	}
	got := b.origin.requests()[0].Header.Get("Authorization")
	if want := "Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+tokenValue)); got != want {
		t.Fatalf("the origin saw %q, want %q", got, want)
	}
}
