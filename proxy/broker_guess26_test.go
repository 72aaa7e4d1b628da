package proxy

import (
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
)

// The round-26 attacks on the guess guard: a lowercase password, which
// net/http's canonical header names (Sunshine2019!) never spell as it is.
const guessLower = "sunshine2019!"

// lowerSecrets binds the lowercase password PASS to api.allowed.example.
func lowerSecrets(t *testing.T) []policy.Secret {
	e, _, err := allowlist.ParseEntry("api.allowed.example")
	if err != nil {
		t.Fatal(err)
	}
	ph, _ := policy.NewPlaceholder([]byte(guessLower), nil)
	return []policy.Secret{{Name: "PASS", Hosts: []allowlist.Entry{e}, Placeholder: ph, Value: []byte(guessLower)}}
}

// namesEcho shows back every header and declared trailer name it was
// sent, before it reads the body: an API that lists what it received.
func namesEcho(w http.ResponseWriter, r *http.Request) {
	var names []string
	for k := range r.Header {
		names = append(names, k)
	}
	for k := range r.Trailer {
		names = append(names, k)
	}
	sort.Strings(names)
	io.WriteString(w, strings.Join(names, "\n"))
	w.(http.Flusher).Flush()
	io.Copy(io.Discard, r.Body)
}

// TestAGuessAsALowercaseHeaderNameIsRefusedWhateverItsCase: the program
// wrote a guess as a header NAME. net/http stores it canonical
// (Sunshine2019!), the guard compared that case-sensitively, and
// egressd's own HTTP/2 transport sent it lowercased, so the password
// reached the origin and its echo came back scrubbed: which name was the
// password. Names are case-insensitive on the wire; so is the guard now.
// The same for a declared trailer name (TestADeclaredTrailerName...).
func TestAGuessAsALowercaseHeaderNameIsRefusedWhateverItsCase(t *testing.T) {
	for _, tc := range []struct {
		name     string
		h2Client bool
		h2Origin bool
		header   string
	}{
		{"h2 to an h2 origin, lowercase", true, true, guessLower},
		{"h1 to an h2 origin, lowercase", false, true, guessLower},
		{"h1 to an h1 origin, uppercase", false, false, strings.ToUpper(guessLower)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBrokerEnv(t, tc.h2Origin, namesEcho, func(e *env) { e.secrets = lowerSecrets(t) })
			req := mustRequest(t, "GET", b.url("api.allowed.example", "/v1/me"), "")
			req.Header[tc.header] = []string{"x"} // as written: no canonical form
			resp, body := do(t, b.client(tc.h2Client), req)
			wantGuessed(t, tc.header, resp, body)
			if n := len(b.origin.requests()); n != 0 {
				t.Fatalf("the origin received %d requests", n)
			}
		})
	}
}

// TestADeclaredTrailerNameCarryingAGuessIsRefusedBeforeTheHeadGoesOut: a
// guess declared as a trailer name (the Trailer header, which net/http
// moves into the request's Trailer keys) goes to the origin in the head,
// long before the body ends, where the guard read it: an origin that
// lists the names it was sent answered before the refusal. Both cases.
func TestADeclaredTrailerNameCarryingAGuessIsRefusedBeforeTheHeadGoesOut(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		for _, name := range []string{guessLower, "Sunshine2019!", guessWeak} {
			t.Run(map[bool]string{false: "h1 ", true: "h2 "}[h2]+name, func(t *testing.T) {
				secrets := lowerSecrets(t)
				if name == guessWeak { // a name as net/http stores it: only when it is read matters
					secrets, _, _ = guessSecrets(t, "api.allowed.example", guessStrong)
				}
				b := newBrokerEnv(t, true, namesEcho, func(e *env) { e.secrets = secrets })
				req := mustRequest(t, "POST", b.url("api.allowed.example", "/v1/notes"), "")
				req.Body = io.NopCloser(strings.NewReader("hello")) // no length: chunked, so trailers can follow
				req.ContentLength = -1
				req.Trailer = http.Header{name: nil}
				resp, body := do(t, b.client(h2), req)
				wantGuessed(t, name, resp, body)
				if n := len(b.origin.requests()); n != 0 {
					t.Fatalf("the origin received %d requests (the head with the trailer's names)", n)
				}
			})
		}
	}
}

// TestAGuessedValueInTheRequestLineNeverReachesTheAuditLog: a request
// refused secret_guessed because its path carried the password was
// audited with its raw path. Every field of a request's record the
// program wrote (method, path; the query is never kept) is recorded with
// each value form replaced by [NAME], escaped ones decoded first. Each
// case in an env of its own: a refusal quarantines, and later refusals
// are folded.
func TestAGuessedValueInTheRequestLineNeverReachesTheAuditLog(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/login/" + guessWeak, "/login/[PASS]"},
		{"GET", "/login/%53ummer2019%21", "/login/[PASS]"},
		{"GET", "/login/%2553ummer2019%2521", "/login/[PASS]"}, // escaped twice
		{"POST", "/v1/a+" + strings.ReplaceAll(guessWeak, "!", "%21") + "?q=" + guessWeak, "/v1/a+[PASS]"},
		{guessWeak, "/v1/me", "/v1/me"},
		// Its base64 broken up by junk (round 29): not a form the record
		// can cut out, so the whole path is the secret's name.
		{"GET", "/login/" + dotted(guessWeak), "[PASS]"},
		// Written with an escape only another view reads (round 50: the
		// record kept it as written, the value readable).
		{"GET", "/login/%5Cu0053ummer2019%21", "[PASS]"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			secrets, _, _ := guessSecrets(t, "api.allowed.example", guessStrong)
			b := newBrokerEnv(t, false, nil, func(e *env) { e.secrets = secrets })
			resp, body := do(t, b.client(false), mustRequest(t, tc.method, b.url("api.allowed.example", tc.path), ""))
			wantGuessed(t, tc.method+" "+tc.path, resp, body)
			b.log.waitEvent(t, map[string]any{"reason": "secret_guessed", "path": tc.want})
			log := b.log.String()
			if strings.Contains(log, guessWeak) || strings.Contains(log, "ummer2019") || strings.Contains(log, dotted(guessWeak)[:12]) {
				t.Fatalf("the audit log holds the value:\n%s", log)
			}
		})
	}
}

// TestAStreamedGuessListIsAnsweredOnlyWhenItsBodyEnds: one request whose
// body streams one guess every 2 ms was refused the moment the value
// arrived, so the 403's time named the line. The origin is still cut off
// at the value (it never has the request whole), but the program is
// answered only once its body has ended, and only then is the
// integration quarantined: nothing it can see changes where the value
// was. Here the body goes on for 4 MiB past the value (more than every
// window and buffer on the way), and no answer may come before its end.
func TestAStreamedGuessListIsAnsweredOnlyWhenItsBodyEnds(t *testing.T) {
	head := "Spring1999!\n" + guessWeak + "\n"
	line := strings.Repeat("Winter2000#\n", 32<<10/12)
	const lines = (4 << 20) / (32 << 10 / 12 * 12)
	for _, tc := range []struct {
		name   string
		h2     bool
		length int64
	}{
		{"h1 chunked", false, -1},
		// One byte of the length is held back until the log is read: with
		// every byte of a declared length sent, the body has ended, and
		// the refusal may be audited at once (a CI run caught it so).
		{"h1 with a length", false, int64(len(head) + lines*len(line) + 1)},
		{"h2", true, -1},
	} {
		h2 := tc.h2
		t.Run(tc.name, func(t *testing.T) {
			secrets, _, _ := guessSecrets(t, "api.allowed.example", guessStrong)
			o := newBodyRecorder(t)
			b := newBrokerEnv(t, h2, o.handle, func(e *env) { e.secrets = secrets })
			c := b.client(h2)
			pr, pw := io.Pipe()
			req := mustRequest(t, "POST", b.url("api.allowed.example", "/v1/notes"), "")
			req.Body, req.ContentLength = pr, tc.length
			type answer struct {
				resp *http.Response
				body string
				err  error
			}
			answered := make(chan answer, 1)
			go func() {
				resp, err := c.Do(req)
				if err != nil {
					answered <- answer{err: err}
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				answered <- answer{resp: resp, body: string(body)}
			}()
			written := make(chan error, 1)
			go func() {
				if _, err := io.WriteString(pw, head); err != nil {
					written <- err
					return
				}
				for range lines {
					if _, err := io.WriteString(pw, line); err != nil {
						written <- err
						return
					}
				}
				written <- nil
			}()
			select {
			case a := <-answered:
				pw.CloseWithError(io.ErrUnexpectedEOF)
				if a.err != nil {
					t.Fatalf("the request failed before its body ended: %v", a.err)
				}
				t.Fatalf("answered %d %q before the body ended: the answer's time names the line", a.resp.StatusCode, a.resp.Header.Get(ReasonHeader))
			case err := <-written:
				if err != nil {
					t.Fatalf("egressd stopped reading the body after the value: %v", err)
				}
			}
			if tripped := b.log.has(t, map[string]any{"reason": "secret_guessed"}); tripped {
				t.Fatal("the refusal was audited (and the integration quarantined) before the body ended")
			}
			if tc.length > 0 {
				go func() { // the byte held back; egressd may answer before it reads it
					io.WriteString(pw, "\n")
					pw.Close()
				}()
			} else {
				pw.Close()
			}
			a := <-answered
			if a.err != nil {
				t.Fatal(a.err)
			}
			wantGuessed(t, "the streamed guess list", a.resp, a.body)
			if o.saw(guessWeak) {
				t.Fatal("the origin received the whole request with the guess in it")
			}
			b.log.waitEvent(t, map[string]any{"reason": "secret_guessed", "decision": "deny", "host": "api.allowed.example"})
			resp, body := do(t, b.client(h2), mustRequest(t, "GET", b.url("api.allowed.example", "/v1/me"), ""))
			wantGuessed(t, "a request after the refusal", resp, body)
		})
	}
}
