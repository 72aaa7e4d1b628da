package proxy

import (
	"bufio"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
)

// The round-29 attacks on the guess guard: bytes the guard judged that
// are not the bytes the origin got, and base64 broken up by junk an
// origin's lenient decoder skips. The password holds a '+', as base64
// keys and many passwords do.
const guessPlus = "winter+2019"

// plusSecrets binds guessPlus as PASS to api.allowed.example.
func plusSecrets(t *testing.T) []policy.Secret {
	e, _, err := allowlist.ParseEntry("api.allowed.example")
	if err != nil {
		t.Fatal(err)
	}
	ph, _ := policy.NewPlaceholder([]byte(guessPlus), nil)
	return []policy.Secret{{Name: "PASS", Hosts: []allowlist.Entry{e}, Placeholder: ph, Value: []byte(guessPlus)}}
}

// targetEcho shows back the request target it received, as received: an
// API that lists the query it was sent.
func targetEcho(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.RequestURI) }

// wantBadRequest fails unless resp is a 400 bad_request with a sentence.
func wantBadRequest(t *testing.T, what string, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode != 400 || resp.Header.Get(ReasonHeader) != string(policy.BadRequest) || !strings.HasPrefix(body, "egressd: ") {
		t.Fatalf("%s: %d %q %.200q, want 400 bad_request with a sentence", what, resp.StatusCode, resp.Header.Get(ReasonHeader), body)
	}
}

// TestAQueryTheProxyWouldReencodeIsRefusedBeforeTheOriginSeesIt: Go's
// ReverseProxy re-encodes a query holding a ';' or a malformed escape
// (ParseQuery, then Encode), so a guess the program wrote as
// winter%202019 went out as winter+2019 (the value), which the guard had
// not seen raw, percent-decoded or form-decoded; an origin that shows its
// target back had the right guess scrubbed to the placeholder (round 29,
// 400 guesses a request). A bare key went out as "key=", a value ending
// in '='. Such a query is refused now, whatever it holds; the query that
// goes out is the one the guard judged.
func TestAQueryTheProxyWouldReencodeIsRefusedBeforeTheOriginSeesIt(t *testing.T) {
	for _, tc := range []struct {
		name, query string
	}{
		{"a space as %20 beside a ';'", "a=summer%202019&g=winter%202019&;"},
		{"a space as %20 beside a bad escape", "g=winter%202019&z=%zz"},
		{"a bare key beside a ';'", "bG9uZ2VyLXRva2VuLXZhbHVlLTE&;"},
		{"a ';' alone", "a=1;b=2"},
	} {
		for _, h2 := range []bool{false, true} {
			t.Run(tc.name+map[bool]string{false: " h1", true: " h2"}[h2], func(t *testing.T) {
				b := newBrokerEnv(t, h2, targetEcho, func(e *env) { e.secrets = plusSecrets(t) })
				req := mustRequest(t, "GET", b.url("api.allowed.example", "/v1/search"), "")
				req.URL.RawQuery = tc.query
				resp, body := do(t, b.client(h2), req)
				wantBadRequest(t, tc.query, resp, body)
				if n := len(b.origin.requests()); n != 0 {
					t.Fatalf("the origin received %d requests: %q", n, b.origin.requests()[0].RequestURI)
				}
				// Refused for its form, not its content: brokering goes on.
				b.doOK(t, b.client(h2), mustRequest(t, "GET", b.url("api.allowed.example", "/v1/search?q=winter%202019"), ""))
			})
		}
	}
}

// TestAnHonestQueryGoesOutAsWritten: what the guard judged is what the
// origin receives, byte for byte.
func TestAnHonestQueryGoesOutAsWritten(t *testing.T) {
	b := newBrokerEnv(t, false, targetEcho, func(e *env) { e.secrets = plusSecrets(t) })
	const target = "/v1/search?z=1&a=b%20c+d&a=%2B&empty=&bare"
	got := b.doOK(t, b.client(false), mustRequest(t, "GET", b.url("api.allowed.example", target), ""))
	if got != target {
		t.Fatalf("the origin got %q, the program wrote %q", got, target)
	}
}

// dotted writes s's base64 with a '.' after every two characters: junk
// Node's Buffer and Python's b64decode skip.
func dotted(s string) string {
	enc := base64.StdEncoding.EncodeToString([]byte(s))
	var out []string
	for i := 0; i < len(enc); i += 2 {
		out = append(out, enc[i:min(i+2, len(enc))])
	}
	return strings.Join(out, ".")
}

// TestABasicCredentialWithJunkBetweenItsCharactersIsNeverForwarded: a
// Basic credential with a '.' after every two base64 characters was not
// decoded by egressd, so neither judged nor rewritten, and went out as
// written; a lenient origin decoded it to the guess and, on the right
// one, answered with the placeholder. A guess in it is now found (the
// guard reads header values with every byte outside the base64 alphabets
// removed), and any Basic credential egressd cannot read itself is
// refused.
func TestABasicCredentialWithJunkBetweenItsCharactersIsNeverForwarded(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "h1", true: "h2"}[h2], func(t *testing.T) {
			b := newBrokerEnv(t, h2, nil, func(e *env) { e.secrets = plusSecrets(t) })
			req := mustRequest(t, "GET", b.url("api.allowed.example", "/v1/me"), "")
			req.Header.Set("Authorization", "Basic "+dotted("u:"+guessPlus))
			resp, body := do(t, b.client(h2), req)
			wantGuessed(t, "a guess in a dotted Basic credential", resp, body)
			if n := len(b.origin.requests()); n != 0 {
				t.Fatalf("the origin received %d requests", n)
			}
		})
	}
	for _, token := range []string{dotted("u:not-the-password"), "dTpw YXNz", "dTpwYXNz!", "dTpw-YXN/"} {
		t.Run("no guess: "+token, func(t *testing.T) {
			b := newBrokerEnv(t, false, nil, func(e *env) { e.secrets = plusSecrets(t) })
			req := mustRequest(t, "GET", b.url("api.allowed.example", "/v1/me"), "")
			req.Header.Set("Authorization", "Basic "+token)
			resp, body := do(t, b.client(false), req)
			wantBadRequest(t, token, resp, body)
			if n := len(b.origin.requests()); n != 0 {
				t.Fatalf("the origin received %d requests", n)
			}
		})
	}
	t.Run("valid ones go out", func(t *testing.T) {
		b := newBrokerEnv(t, false, nil, func(e *env) { e.secrets = plusSecrets(t) })
		for _, token := range []string{"dTpwYXNz", "dTpwYXNzMQ==", "dTpwYXNzMQ", "  dTpwYXNzMQ== ", "P_8-"} {
			req := mustRequest(t, "GET", b.url("api.allowed.example", "/v1/me"), "")
			req.Header.Set("Authorization", "Basic "+token)
			b.doOK(t, b.client(false), req)
		}
	})
}

// TestWrappedBase64OfAGuessInABodyIsRefused: base64 wrapped with line
// breaks (MIME, PEM) holds no unbroken piece of the value's encoding, so
// a body of 1 600 encoded guesses went out whole, and an origin that
// decodes and stores uploads served the right one back as the
// placeholder. The guard reads the body with every byte outside the
// base64 alphabets removed too.
func TestWrappedBase64OfAGuessInABodyIsRefused(t *testing.T) {
	for _, wrap := range []struct {
		name string
		cut  func(string) string
	}{
		{"76 columns, CRLF", func(s string) string { return wrapAt(s, 76, "\r\n") }},
		{"4 columns, LF", func(s string) string { return wrapAt(s, 4, "\n") }},
		{"url alphabet, 3 columns, tabs", func(s string) string {
			return wrapAt(strings.NewReplacer("+", "-", "/", "_").Replace(s), 3, "\t")
		}},
	} {
		for _, h2 := range []bool{false, true} {
			t.Run(wrap.name+map[bool]string{false: " h1", true: " h2"}[h2], func(t *testing.T) {
				o := newBodyRecorder(t)
				b := newBrokerEnv(t, h2, o.handle, func(e *env) { e.secrets = plusSecrets(t) })
				var lines []string
				for _, g := range strings.Split(guessList(), "\n") {
					lines = append(lines, wrap.cut(base64.StdEncoding.EncodeToString([]byte(strings.ToLower(g[:6])+"+"+g[6:10]))))
				}
				lines = append(lines, wrap.cut(base64.StdEncoding.EncodeToString([]byte("note: "+guessPlus))))
				resp, body := do(t, b.client(h2), mustRequest(t, "POST", b.url("api.allowed.example", "/v1/files"), strings.Join(lines, "\n")))
				wantGuessed(t, "wrapped base64", resp, body)
				if o.saw("") {
					t.Fatal("the origin received the whole body")
				}
			})
		}
	}
	t.Run("wrapped base64 of other data goes out", func(t *testing.T) {
		o := newBodyRecorder(t)
		b := newBrokerEnv(t, false, o.handle, func(e *env) { e.secrets = plusSecrets(t) })
		body := wrapAt(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("summer+2019 winter 2019 ", 40))), 76, "\r\n")
		if got := b.doOK(t, b.client(false), mustRequest(t, "POST", b.url("api.allowed.example", "/v1/files"), body)); got != body {
			t.Fatalf("the origin got %.100q", got)
		}
	})
}

// wrapAt cuts s into lines of n characters joined by eol.
func wrapAt(s string, n int, eol string) string {
	var out []string
	for i := 0; i < len(s); i += n {
		out = append(out, s[i:min(i+n, len(s))])
	}
	return strings.Join(out, eol)
}

// TestAPathTheTransportWouldEscapeAgainIsRefused: Go's transport writes a
// path through EscapedPath, which escapes a raw path it does not take as
// valid ('{' goes out as %7B), so a value holding "%7B" would reach the
// origin from a target the guard read without it. Refused, like a query
// ReverseProxy re-encodes.
func TestAPathTheTransportWouldEscapeAgainIsRefused(t *testing.T) {
	b := newBrokerEnv(t, false, targetEcho, func(e *env) { e.secrets = plusSecrets(t) })
	tc, target := b.brokeredTLS(t, "http/1.1")
	defer tc.Close()
	io.WriteString(tc, "GET /v1/a{b} HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	wantBadRequest(t, "/v1/a{b}", resp, string(body))
	if n := len(b.origin.requests()); n != 0 {
		t.Fatalf("the origin received %d requests: %q", n, b.origin.requests()[0].RequestURI)
	}
}
