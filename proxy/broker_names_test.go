package proxy

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/egressd/egressd/policy"
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

// TestBrokerAnotherHostsPlaceholderDeclaredAsATrailerNameIsRefusedAtTheHead
// is issue 15's seventh review, finding 2: "Trailer: X-<OTHER's
// placeholder>" on a chunked request to api.allowed.example was forwarded
// in the request head (the origin saw the name in r.Trailer) before the
// trailer check ran at the body's end, and with the body left unfinished
// the refusal never came. The declared names are checked like any header:
// refused at the head, nothing reaches the origin, and the refusal is
// answered while the body is still open.
func TestBrokerAnotherHostsPlaceholderDeclaredAsATrailerNameIsRefusedAtTheHead(t *testing.T) {
	// The body stays open until the refusal is in the audit log, or until
	// the origin is reached (what failed before), which ends it so the test
	// fails instead of waiting on a body nobody finishes. (net/http's
	// HTTP/1.1 client returns nothing before its body is written.)
	var open atomic.Pointer[io.PipeWriter]
	b := newBrokerEnv(t, false, func(w http.ResponseWriter, r *http.Request) {
		open.Load().CloseWithError(errors.New("the origin was reached"))
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	for i, h2 := range []bool{false, true} {
		body, unfinished := io.Pipe()
		open.Store(unfinished)
		t.Cleanup(func() { unfinished.Close() }) // a failure must not leave the request open
		stop := make(chan struct{})
		t.Cleanup(func() { close(stop) })
		go func() {
			for strings.Count(b.log.String(), `"reason":"secret_misdirected"`) <= i {
				select {
				case <-b.log.wrote:
				case <-stop:
					return
				}
			}
			unfinished.Close() // refused before the body ended: now it may end
		}()
		req, err := http.NewRequest("POST", b.url("api.allowed.example", "/upload"), body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = -1
		req.Trailer = http.Header{"X-" + otherPH: nil}
		resp, err := b.client(h2).Do(req)
		if n := len(b.origin.requests()); n != 0 {
			t.Fatalf("h2 %v: the origin received %d requests declaring another host's placeholder (%v)", h2, n, err)
		}
		if err != nil {
			t.Fatalf("h2 %v: %v", h2, err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || resp.Header.Get(ReasonHeader) != string(policy.SecretMisdirected) {
			t.Fatalf("h2 %v: %d %q %q, want 403 secret_misdirected", h2, resp.StatusCode, resp.Header.Get(ReasonHeader), answer)
		}
	}
	b.log.waitEvent(t, map[string]any{"event": "request", "reason": "secret_misdirected", "decision": "deny", "status": float64(403)})
}
