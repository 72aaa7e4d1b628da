package proxy

import (
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
)

// The secrets of the guessing and chaining attacks (round 24): a human
// password and a Google-style API key.
const (
	guessWeak   = "Summer2019!"
	guessStrong = "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
)

// guessSecrets binds the weak password to weakHost and the key to
// api.allowed.example.
func guessSecrets(t *testing.T, weakHost, strong string) (secrets []policy.Secret, phWeak, phStrong string) {
	entry := func(s string) []allowlist.Entry {
		e, _, err := allowlist.ParseEntry(s)
		if err != nil {
			t.Fatal(err)
		}
		return []allowlist.Entry{e}
	}
	phWeak, _ = policy.NewPlaceholder([]byte(guessWeak), nil)
	phStrong, _ = policy.NewPlaceholder([]byte(strong), []string{phWeak})
	return []policy.Secret{
		{Name: "PASS", Hosts: entry(weakHost), Placeholder: phWeak, Value: []byte(guessWeak)},
		{Name: "KEY", Hosts: entry("api.allowed.example"), Placeholder: phStrong, Value: []byte(strong)},
	}, phWeak, phStrong
}

// hexNotes shows back a field it decodes from hex, followed by the X-Note
// header it was sent: an API that transforms what it stores, so the
// program can have it write bytes the program never sent as they are.
func hexNotes(w http.ResponseWriter, r *http.Request) {
	head, _ := hex.DecodeString(r.Header.Get("X-Hex"))
	w.Write(head)
	io.WriteString(w, r.Header.Get("X-Note"))
}

// noKeyBytes fails if answer holds 5 consecutive bytes of key past the
// first n (which the program knew).
func noKeyBytes(t *testing.T, answer, key string, n int) {
	t.Helper()
	for i := n; i+5 <= len(key); i++ {
		if strings.Contains(answer, key[i:i+5]) {
			t.Fatalf("the answer holds the key's bytes %q: %q", key[i:i+5], answer)
		}
	}
}

// TestABuiltTokenWhoseTailIsTheKeysHeadDoesNotLetTheKeyOutRaw: knowing the
// weak password, the program has egressd build a Basic token ending in the
// key's public prefix ("AIza"), then has the origin show the token minus
// that prefix followed by the key. The scrubber replaced the token, which
// swallowed the key's first bytes, skipped the key's own match, and the
// rest of the key came back raw.
func TestABuiltTokenWhoseTailIsTheKeysHeadDoesNotLetTheKeyOutRaw(t *testing.T) {
	secrets, phWeak, phStrong := guessSecrets(t, "api.allowed.example", guessStrong)
	b := newBrokerEnv(t, false, hexNotes, func(e *env) { e.secrets = secrets })
	c := b.client(false)
	tail, _ := base64.StdEncoding.DecodeString("AIza")
	written := base64.StdEncoding.EncodeToString([]byte("abc:" + phWeak + string(tail)))
	req := mustRequest(t, "POST", b.url("api.allowed.example", "/v1/notes"), "")
	req.Header.Set("Authorization", "Basic "+written)
	b.doOK(t, c, req)
	built := base64.StdEncoding.EncodeToString([]byte("abc:" + guessWeak + string(tail)))
	req = mustRequest(t, "POST", b.url("api.allowed.example", "/v1/notes"), "")
	req.Header.Set("X-Hex", hex.EncodeToString([]byte(strings.TrimSuffix(built, "AIza"))))
	req.Header.Set("X-Note", phStrong)
	noKeyBytes(t, b.doOK(t, c, req), guessStrong, 4)
}

// TestABuiltTokenForAnotherHostDoesNotLetARandomKeyOutRaw: the weak secret
// is bound to another host; the key is random, and the program guesses
// only its first character (here, rightly). A token built for the other
// host was searched in this host's answers and overlapped the key's head
// by one byte.
func TestABuiltTokenForAnotherHostDoesNotLetARandomKeyOutRaw(t *testing.T) {
	const strong = "q7Vd2LmX9pR4tKz8WbN1cY6hJ3sF0gUe"
	secrets, phWeak, phStrong := guessSecrets(t, "other.allowed.example", strong)
	b := newBrokerEnv(t, false, hexNotes, func(e *env) { e.secrets = secrets })
	c := b.client(false)
	tail, _ := base64.StdEncoding.DecodeString("AAA" + strong[:1])
	written := base64.StdEncoding.EncodeToString([]byte("abc:" + phWeak + string(tail)))
	req := mustRequest(t, "POST", b.url("other.allowed.example", "/v1/notes"), "")
	req.Header.Set("Authorization", "Basic "+written)
	b.doOK(t, c, req)
	built := base64.StdEncoding.EncodeToString([]byte("abc:" + guessWeak + string(tail)))
	req = mustRequest(t, "POST", b.url("api.allowed.example", "/v1/notes"), "")
	req.Header.Set("X-Hex", hex.EncodeToString([]byte(built[:len(built)-1])))
	req.Header.Set("X-Note", phStrong)
	noKeyBytes(t, b.doOK(t, c, req), strong, 1)
}

func mustRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}
