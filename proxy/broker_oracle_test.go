package proxy

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

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

// bodyRecorder is an API that keeps the integration's data and shows it
// back: it answers each body it received whole, and remembers it.
type bodyRecorder struct {
	mu     sync.Mutex
	bodies []string
	// held is signalled by each request to /v1/hold, answered only once
	// release is closed.
	held, release chan struct{}
}

func newBodyRecorder(t *testing.T) *bodyRecorder {
	o := &bodyRecorder{held: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(func() { close(o.release) })
	return o
}

func (o *bodyRecorder) handle(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/hold" {
		o.held <- struct{}{}
		<-o.release
		return
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return // an aborted request: the origin never saw it whole
	}
	o.mu.Lock()
	o.bodies = append(o.bodies, string(b))
	o.mu.Unlock()
	w.Write(b)
}

func (o *bodyRecorder) saw(s string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, b := range o.bodies {
		if strings.Contains(b, s) {
			return true
		}
	}
	return false
}

// guessList is 1 600 password candidates, one a line, the right one among them.
func guessList() string {
	var cands []string
	for _, s := range []string{"Spring", "Summer", "Autumn", "Winter"} {
		for y := 1950; y < 2050; y++ {
			for _, x := range []string{"!", "@", "#", "$"} {
				cands = append(cands, s+itoa(uint16(y))+x)
			}
		}
	}
	return strings.Join(cands, "\n")
}

// wantGuessed fails unless resp is a 403 secret_guessed.
func wantGuessed(t *testing.T, what string, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode != 403 || resp.Header.Get(ReasonHeader) != string(policy.SecretGuessed) {
		t.Fatalf("%s: %d %q %.200q, want 403 secret_guessed", what, resp.StatusCode, resp.Header.Get(ReasonHeader), body)
	}
}

// TestAGuessListInABodyIsRefusedAndQuarantinesTheIntegrationsBrokering: a
// program posted 1 600 password candidates to a bound host that shows its
// data back and read which line came back as the placeholder: the
// password, in one request. A request carrying a value is now refused
// (secret_guessed) before the origin has it whole, and every later request
// of the integration to any bound host, on a connection open before or
// one opened after, is refused too: one bit per process.
func TestAGuessListInABodyIsRefusedAndQuarantinesTheIntegrationsBrokering(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "h1", true: "h2"}[h2], func(t *testing.T) { guessListIsRefused(t, h2) })
	}
}

func guessListIsRefused(t *testing.T, h2 bool) {
	secrets, phWeak, _ := guessSecrets(t, "other.allowed.example", guessStrong)
	o := newBodyRecorder(t)
	b := newBrokerEnv(t, h2, o.handle, func(e *env) { e.secrets = secrets })
	// A connection to the other bound host, open (kept alive) before the guess.
	before := b.client(false)
	b.doOK(t, before, mustRequest(t, "GET", b.url("other.allowed.example", "/v1/me"), ""))
	// And one egressd has terminated TLS on, a request on it waiting for
	// its answer, whose end is seen directly.
	idle, target := b.brokeredTLS(t, "http/1.1")
	defer idle.Close()
	io.WriteString(idle, "GET /v1/hold HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	<-o.held

	c := b.client(h2)
	resp, body := do(t, c, mustRequest(t, "POST", b.url("api.allowed.example", "/v1/notes"), guessList()))
	wantGuessed(t, "the guess list", resp, body)
	if strings.Contains(body, phWeak) {
		t.Fatalf("the answer names the guessed line: %q", body)
	}
	if o.saw(guessWeak) {
		t.Fatal("the origin received the whole request with the guess in it")
	}
	b.log.waitEvent(t, map[string]any{"reason": "secret_guessed", "decision": "deny", "host": "api.allowed.example"})
	idle.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound on a failure, not a wait
	if _, err := io.Copy(io.Discard, idle); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an open brokered connection of the integration did not end: %v", err)
	}

	for _, tc := range []struct {
		name string
		c    *http.Client
		host string
	}{
		{"a connection open before, another bound host", before, "other.allowed.example"},
		{"a new connection, the same host", b.client(false), "api.allowed.example"},
		{"a new connection, another bound host", b.client(true), "other.allowed.example"},
	} {
		resp, body := do(t, tc.c, mustRequest(t, "GET", b.url(tc.host, "/v1/me"), ""))
		wantGuessed(t, tc.name, resp, body)
	}
	if strings.Contains(b.log.String(), guessWeak) {
		t.Fatal("the audit log holds the value")
	}
	if !strings.Contains(b.log.String(), "secret PASS") {
		t.Fatalf("the audit log does not name the secret guessed:\n%s", b.log.String())
	}
}

// TestAValueInAHeaderOrURLAsWrittenIsRefusedBeforeTheOriginSeesIt: the
// same guess in the request target, in a custom header, and as a piece of
// a Basic token the program encoded itself; each is refused with nothing
// sent (each quarantines, so each runs in an env of its own).
func TestAValueInAHeaderOrURLAsWrittenIsRefusedBeforeTheOriginSeesIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(r *http.Request)
	}{
		{"query", func(r *http.Request) { r.URL.RawQuery = "q=" + strings.ReplaceAll(guessWeak, "!", "%21") }},
		{"header", func(r *http.Request) { r.Header.Set("X-Guess", "a,"+guessWeak+",b") }},
		{"basic", func(r *http.Request) {
			r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("me:"+guessWeak)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secrets, _, _ := guessSecrets(t, "other.allowed.example", guessStrong)
			b := newBrokerEnv(t, false, nil, func(e *env) { e.secrets = secrets })
			req := mustRequest(t, "GET", b.url("api.allowed.example", "/v1/me"), "")
			tc.set(req)
			resp, body := do(t, b.client(false), req)
			wantGuessed(t, tc.name, resp, body)
			if n := len(b.origin.requests()); n != 0 {
				t.Fatalf("the origin received %d requests", n)
			}
		})
	}
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
