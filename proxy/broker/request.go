package broker

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/policy"
)

// ServeHTTP checks one request, forwards it with its placeholders
// substituted, and records it. Nothing is forwarded before the checks, and
// no byte of a forwarded request reaches the origin before its record is
// written (sent). Its outcome is recorded by a deferred call that runs when
// ReverseProxy aborts the handler too (it panics with http.ErrAbortHandler
// when the client goes away mid-answer), and the panic then goes on, so
// net/http still drops the client's connection or stream.
func (b *broker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !b.enter() {
		return
	}
	defer b.handlers.Done()
	forms := valueForms(b.every())
	st := &reqState{seq: b.nextSeq(), method: recorded(r.Method, forms), path: recorded(r.URL.Path, forms)}
	body := &countingReader{ReadCloser: r.Body}
	checked := &trailerCheck{ReadCloser: body, trailer: r, unbound: b.unbound(), st: st}
	guard := newGuessGuard(checked, forms, r, func(name string) {
		st.guessed.Store(&name)
		if st.finished.Load() { // the transport read on past the handler's end: nothing left to settle
			b.quarantine.trip(name, b)
		}
	})
	guard.noncanonical = func(sentence string) { st.noncanonical.Store(&sentence) }
	r.Body = guard
	cw := &countingWriter{ResponseWriter: w, scrub: func(h http.Header) { scrubHeader(h, b.pairs(st)) }}
	st.settle = func(name string) {
		b.settleGuess(cw, checked, body)
		b.quarantine.trip(name, b)
	}
	defer func() {
		aborted := recover()
		// A value found after the origin's answer began (a full-duplex
		// origin) cut that answer off: still, the handler ends only at
		// the body's end, and only then is the integration quarantined.
		st.settleOnce()
		st.finished.Store(true)
		if name := st.guessed.Load(); name != nil && !st.settled {
			b.quarantine.trip(*name, b)
		}
		b.finish(r, st, body, cw, aborted != nil)
		if aborted != nil {
			panic(aborted)
		}
	}()
	// The head's fields this connection already found clean, under the
	// same secrets, are not read again (cleanFields).
	unbound := b.unbound()
	keys := fieldKeys(r.Header, secretsDigest(forms, unbound))
	fresh := b.clean.unseen(r.Header, keys)
	if reason := b.guard(r, fresh, st, forms); reason != "" {
		st.reason = reason
		b.refuse(cw, reason)
		return
	}
	if reason := b.check(r, fresh); reason != "" {
		st.reason = reason
		b.refuse(cw, reason)
		return
	}
	b.clean.remember(keys)
	if sentence := cmp.Or(malformed(r), canonicalHead(r.Header)); sentence != "" {
		st.reason, st.err = policy.BadRequest, sentence
		b.answer(cw, policy.BadRequest, http.StatusBadRequest, sentence)
		return
	}
	ctx, stop := b.waitBounded(context.WithValue(r.Context(), stateKey{}, st))
	defer stop()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { b.sent(r, st, info.Conn) },
	})
	b.proxy.ServeHTTP(cw, r.WithContext(ctx))
}

// nextSeq numbers a request on the connection.
func (b *broker) nextSeq() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	return b.seq
}

// sent writes the record of a request about to go to the origin on conn:
// the transport calls it (GotConn) once it holds a verified connection and
// before it writes a byte of the request. Once only: a request the
// transport retries went out already. A record that cannot be written
// closes conn, and every connection the transport retries the request on,
// so the request fails before any of it is written.
func (b *broker) sent(r *http.Request, st *reqState, conn net.Conn) {
	if !st.sent {
		st.sent = true
		if err := b.c.Record(Request{Seq: st.seq, Method: st.method, Path: st.path, Secrets: st.used}); err != nil {
			st.reason, st.err = policy.AuditUnavailable, "the request's record could not be written; it was not sent"
		}
	}
	if st.reason == policy.AuditUnavailable {
		conn.Close()
	}
}

// finish records how a request ended: a forwarded one's outcome, or a
// refused one's record. aborted says the exchange was cut off (the client
// went away before the answer's end).
func (b *broker) finish(r *http.Request, st *reqState, body *countingReader, cw *countingWriter, aborted bool) {
	if st.trailerMisdirected.Load() {
		st.reason = policy.SecretMisdirected
	}
	if name := st.guessed.Load(); name != nil {
		st.reason, st.err = policy.SecretGuessed, guessedErr(*name)
	} else if sentence := st.noncanonical.Load(); sentence != nil {
		st.reason, st.err = policy.BadRequest, *sentence
	}
	status := cw.status
	if status == 0 {
		status = st.status
	}
	b.mu.Lock()
	b.up += body.n
	b.down += cw.n
	b.mu.Unlock()
	if aborted && st.err == "" {
		st.err = "the client went away before the end of the answer"
	}
	req := Request{
		Seq: st.seq, Method: st.method, Path: st.path, Status: status, Up: body.n, Down: cw.n,
		Secrets: st.used, Reason: st.reason, Err: st.err,
	}
	if st.sent {
		b.c.Outcome(req)
		return
	}
	b.c.Record(req)
}

// errUpstreamBusy cancels a request that waited WaitTimeout for one of
// the connection's maxUpstreamConns connections to the origin.
var errUpstreamBusy = errors.New("every connection to the origin stayed busy")

// waitBounded gives a request WaitTimeout to be given a connection to the
// origin (the transport's GotConn); past it the request is cancelled with
// errUpstreamBusy, so no request waits, holding its header, for ever.
func (b *broker) waitBounded(parent context.Context) (ctx context.Context, stop func()) {
	if b.c.WaitTimeout <= 0 {
		return parent, func() {}
	}
	ctx, cancel := context.WithCancelCause(parent)
	timer := time.AfterFunc(b.c.WaitTimeout, func() { cancel(errUpstreamBusy) })
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { timer.Stop() },
	})
	return ctx, func() { timer.Stop(); cancel(nil) }
}

// guard refuses a request once the integration's brokering is
// quarantined, and a request whose head carries a secret's value (which
// quarantines it): guard.go says why. It runs before every other check, on
// the head as the program wrote it.
func (b *broker) guard(r *http.Request, fresh http.Header, st *reqState, forms []valueForm) policy.Reason {
	if name := b.quarantine.Tripped(); name != "" {
		st.err = "brokering for this integration is quarantined: an earlier request carried the real value of secret " + name
		return policy.SecretGuessed
	}
	if name := guessedInHead(r, fresh, forms); name != "" {
		b.quarantine.trip(name, b)
		st.err = guessedErr(name)
		return policy.SecretGuessed
	}
	return ""
}

// settleGuess is what follows a request body the guard found a value in,
// once the transport has given the request up (the origin never had it
// whole): the rest of the body is read and discarded, to its end or
// until maxGuessedBody of it has come or no byte has for the connection's
// IdleTimeout, and only then is the integration quarantined and the
// program answered. Each bound is set by what the program sends, never
// by where the value was, so neither the answer nor the quarantine (a
// request on another connection refused) tells which line it was.
func (b *broker) settleGuess(w http.ResponseWriter, rest io.Reader, counted *countingReader) {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for counted.n < maxGuessedBody {
		if b.c.IdleTimeout > 0 {
			rc.SetReadDeadline(time.Now().Add(b.c.IdleTimeout))
		}
		if _, err := rest.Read(buf); err != nil {
			break
		}
	}
	rc.SetReadDeadline(time.Time{})
}

// guessedErr is the audit log's account of a request that carried the
// value of the secret name: by name, never the value.
func guessedErr(name string) string {
	return "the request carried the real value of secret " + name + " (a guess or a leak); brokering for this integration is quarantined"
}

// enter counts a request in, unless the connection is already done.
func (b *broker) enter() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.handlers.Add(1)
	return true
}

// check refuses, before anything is forwarded: any request once the audit
// log fails (deny mode); a tunnel inside the connection; a request for
// another host than the connection's (the leaf was issued for one name; a
// shared front end must not be asked for another through it); one that
// carries another host's placeholder (in its declared trailer names too);
// one with a bound placeholder raw in a Basic credential; one whose
// substitution would grow
// its header past maxHeaderGrowth, or make a value or a Basic token longer
// than egressd will build (and then search every response for).
func (b *broker) check(r *http.Request, fresh http.Header) policy.Reason {
	if b.c.Admit != nil {
		if reason := b.c.Admit(); reason != "" {
			return reason
		}
	}
	if r.Method == http.MethodConnect {
		return policy.MethodNotAllowed // the origin is not to be a proxy: a tunnel inside would escape every check
	}
	if !b.sameHost(r.Host) || (r.URL.Host != "" && !b.sameHost(r.URL.Host)) {
		return policy.HostMismatch
	}
	// An HTTP/2 request may carry a host field beside :authority; net/http
	// leaves it in the header (HTTP/1.1's Host it moves to r.Host). Go's
	// transports drop it on the way out, but a Host that disagrees is
	// refused here, not left to that.
	for _, h := range r.Header.Values("Host") {
		if !b.sameHost(h) {
			return policy.HostMismatch
		}
	}
	// The whole request line: the method reaches the origin as the target does.
	// The declared trailer names too (net/http moves the Trailer header into
	// r.Trailer's keys): they reach the origin in the head, long before the
	// body's end, where trailerCheck reads the trailer's values.
	if unbound := b.unbound(); misdirected(r.Method+" "+r.RequestURI, fresh, unbound) || misdirectedTrailer(r.Trailer, unbound) {
		return policy.SecretMisdirected
	}
	if rawInBasic(r.Header, b.c.Bound) || cookieSplit(r.Header, b.c.Bound) {
		return policy.SecretMisplaced
	}
	if headerGrowth(r.Header, b.c.Bound) > maxHeaderGrowth || oversized(r.Header, b.c.Bound) ||
		basicCarrying(r.Header, b.c.Bound) > maxBasicPerRequest {
		return policy.BadRequest
	}
	return ""
}

// sameHost reports whether authority names the connection's host, with no
// port, 443 or the CONNECT port.
func (b *broker) sameHost(authority string) bool {
	host, port := authority, ""
	if h, p, err := net.SplitHostPort(authority); err == nil {
		host, port = h, p
	}
	if !strings.EqualFold(host, b.c.Host) {
		return false
	}
	return port == "" || port == "443" || port == strconv.Itoa(int(b.c.Port))
}

// rewrite sends the request to the origin of this connection only, with
// placeholders substituted. The origin is asked for identity: egressd
// scrubs only bytes it reads as they are, and decompresses nothing (Go's
// transport, left to ask for gzip, decompressed one layer when the first
// Content-Encoding field said gzip and then dropped every field, so a
// second layer reached the program with no label to refuse). Any
// encoding on the answer is refused (modifyResponse). Range
// and If-Range are dropped: a brokered host always answers whole bodies,
// since a range of an echo is a piece of a value cut where the
// integration chose, which no scrubber can recognise.
func (b *broker) rewrite(pr *httputil.ProxyRequest) {
	pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "https", b.authority(), b.authority()
	// The query goes out as the program wrote it and the guard judged it,
	// never as ReverseProxy cleaned it (malformed.go refuses every query
	// its default cleaning changes; this covers the rest).
	pr.Out.URL.RawQuery = pr.In.URL.RawQuery
	pr.Out.Header.Set("Accept-Encoding", "identity")
	pr.Out.Header.Del("Range")
	pr.Out.Header.Del("If-Range")
	st := stateOf(pr.Out.Context())
	st.used, st.echoes = substituteHeaders(pr.Out.Header, b.c.Bound)
	b.built.remember(b.c.Host, st.echoes)
}

// unbound is every secret whose placeholder this connection refuses: the
// others of its opening, and any secret in force now that is not bound
// here (a reload may have added one for another host, or given one a new
// placeholder; a reload that changes this host's own secrets closes the
// connection instead).
func (b *broker) unbound() []policy.Secret {
	if b.c.Secrets == nil {
		return b.c.Unbound
	}
	mine := map[string]bool{}
	for _, sec := range b.c.Bound {
		mine[sec.Placeholder] = true
	}
	out := append([]policy.Secret(nil), b.c.Unbound...)
	for _, sec := range b.c.Secrets() {
		if !mine[sec.Placeholder] {
			out = append(out, sec)
		}
	}
	return out
}

// every is each secret egressd knows, bound here or not: responses are
// scrubbed of them all, since a value one host stored may be served back
// by another host of the same service. Those in force now (Conn.Secrets,
// read per response) come with those of the connection's opening: a
// reload that rotated another host's value must not let the new one
// through on a connection opened before it, nor the old one.
func (b *broker) every() []policy.Secret {
	all := append(append([]policy.Secret(nil), b.c.Bound...), b.c.Unbound...)
	if b.c.Secrets == nil {
		return all
	}
	seen := map[string]bool{}
	for _, sec := range all {
		seen[string(sec.Value)] = true
	}
	for _, sec := range b.c.Secrets() {
		if !seen[string(sec.Value)] {
			seen[string(sec.Value)] = true
			all = append(all, sec)
		}
	}
	return all
}

// modifyResponse puts placeholders back in place of the values in the
// response's header, identity-encoded body and trailers. A body labelled
// with any encoding but identity, which egressd did not ask for, is
// refused: it cannot be scrubbed, and the program may well decode it (a
// plain echo labelled "utf-8", gzip however labelled, brotli sent
// unasked). A partial answer,
// which egressd never asked for, is refused too.
func (b *broker) modifyResponse(resp *http.Response) error {
	st := stateOf(resp.Request.Context())
	st.status = resp.StatusCode // a 101 is written on the hijacked connection, past countingWriter
	resp.Status = standardStatus(resp.StatusCode)
	if partial(resp) {
		return errPartial
	}
	if enc := encoded(resp.Header); enc != "" && resp.StatusCode != http.StatusSwitchingProtocols {
		return fmt.Errorf("%w (%q)", errEncoded, enc)
	}
	resp.Header.Del("Accept-Ranges") // ranges are dropped on the way out: none is on offer
	pairs := b.pairs(st)
	scrubHeader(resp.Header, pairs)
	// The declared trailer names, now: ReverseProxy announces them in the
	// head it writes next, before the body (and scrubs the values at EOF).
	scrubHeader(resp.Trailer, pairs)
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	resp.Body = newResponseScrubber(resp.Body, pairs, func() { scrubHeader(resp.Trailer, pairs) })
	for _, p := range pairs.all() {
		if len(p.from) != len(p.to) {
			resp.ContentLength = -1
			resp.Header.Del("Content-Length")
			break
		}
	}
	return nil
}

// standardStatus is the status line text egressd relays for code: the
// standard one, never the origin's reason phrase. ReverseProxy writes a
// 101's status line as the origin sent it (other statuses go through
// WriteHeader, which writes the standard text), and an origin may echo
// what it was sent there. Replaced, not scrubbed: a scrubber removes whole
// values only, and the phrase means nothing to a client; what is lost is
// what net/http already drops for every other status.
func standardStatus(code int) string {
	return strconv.Itoa(code) + " " + http.StatusText(code)
}

// errEncoded is a body modifyResponse refused because it cannot read it.
var errEncoded = errors.New("the origin answered with a body in an encoding egressd cannot read, so cannot scrub")

// encoded is the first Content-Encoding token of h that is not "identity",
// across every field and comma-separated list, or "" for a body egressd
// reads as it is.
func encoded(h http.Header) string {
	for _, v := range h.Values("Content-Encoding") {
		for _, tok := range strings.Split(v, ",") {
			if t := strings.TrimSpace(tok); t != "" && !strings.EqualFold(t, "identity") {
				return t
			}
		}
	}
	return ""
}

// errPartial is a partial answer modifyResponse refused.
var errPartial = errors.New("the origin answered with part of a body, which egressd did not ask for")

// partial reports a 206, or a multipart/byteranges body under any status.
func partial(resp *http.Response) bool {
	if resp.StatusCode == http.StatusPartialContent {
		return true
	}
	// By prefix, not by mime.ParseMediaType: a malformed parameter must
	// not make the type unreadable, and so acceptable.
	for _, ct := range resp.Header.Values("Content-Type") {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "multipart/byteranges") {
			return true
		}
	}
	return false
}

// pairs are what a response to the request of st is scrubbed of: every
// secret's value, each Basic token egressd built for the integration
// lately (an origin may show a stored one back on a later request) and
// those of this request (never forgotten before its answer). There are at
// most len(secrets) + maxBuiltTokens + maxBasicPerRequest: the scrubber's
// work is linear in the body with that constant.
func (b *broker) pairs(st *reqState) scrubSet {
	return scrubPairs(b.every(), append(b.built.all(b.c.Host), st.echoes...))
}

// redact applies to s what responses get (pairs). An error from the
// transport or the reverse proxy may quote a request header after
// substitution (a mismatched Upgrade did, raw and as a Basic token): it
// goes to the audit log, which names secrets only by NAME.
//
// Each value is also replaced in every escaped form egressd or a library
// it uses prints a string in (escapedForms): a value holding `"`, `\` or
// a control byte is not itself in an error that quoted it with %q.
func (b *broker) redact(s string, st *reqState) string {
	set := b.pairs(st)
	s = string(set.scrub([]byte(s))) // the raw forms, by the chain rule
	for _, p := range set.all() {
		for _, form := range escapedForms(string(p.from)) {
			s = strings.ReplaceAll(s, form, string(p.to))
		}
	}
	return s
}

// upstreamError answers a request the origin could not be asked, or whose
// answer egressd refused: 502, with upstream_unverified when the origin's
// certificate did not verify, response_refused for a partial answer.
func (b *broker) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	st := stateOf(r.Context())
	if st.reason == policy.AuditUnavailable { // sent closed the connection: no record, no request
		b.refuse(w, st.reason)
		return
	}
	if name := st.guessed.Load(); name != nil {
		st.reason, st.err = policy.SecretGuessed, guessedErr(*name)
		st.settleOnce()
		if r.Context().Err() == nil {
			b.refuse(w, st.reason)
		}
		return
	}
	if sentence := st.noncanonical.Load(); sentence != nil {
		// A rule about the body's form, known to the program before it
		// sent a byte: answered at once, nothing settled.
		st.reason, st.err = policy.BadRequest, *sentence
		if r.Context().Err() == nil {
			b.answer(w, policy.BadRequest, http.StatusBadRequest, *sentence)
		}
		return
	}
	st.reason, st.err = policy.DialError, b.redact(err.Error(), st)
	if errors.Is(context.Cause(r.Context()), errUpstreamBusy) {
		st.reason = policy.Timeout
		b.refuse(w, st.reason)
		return
	}
	switch {
	case st.trailerMisdirected.Load():
		st.reason = policy.SecretMisdirected
	case unverified(err):
		st.reason = policy.UpstreamUnverified
	case errors.Is(err, errPartial), errors.Is(err, errEncoded):
		st.reason, st.status = policy.ResponseRefused, 0
	}
	if r.Context().Err() != nil {
		return // the client went away; nobody to answer
	}
	b.refuse(w, st.reason)
}

func unverified(err error) bool {
	var hs *handshakeError
	if !errors.As(err, &hs) {
		return false
	}
	var ve *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &ve) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci)
}

// refuse answers a request egressd will not forward, as every egressd
// refusal does: a status, the reason header and one sentence.
func (b *broker) refuse(w http.ResponseWriter, reason policy.Reason) {
	code := http.StatusForbidden
	switch reason {
	case policy.UpstreamUnverified, policy.DialError, policy.ResponseRefused:
		code = http.StatusBadGateway
	case policy.MethodNotAllowed:
		code = http.StatusMethodNotAllowed
	case policy.SecretMisplaced:
		code = http.StatusBadRequest
	case policy.BadRequest:
		code = http.StatusRequestHeaderFieldsTooLarge // the only bad request refused here
	case policy.AuditUnavailable:
		code = http.StatusServiceUnavailable
	case policy.LimitExceeded:
		code = http.StatusTooManyRequests
	case policy.Timeout: // no connection to the origin became free in time
		code = http.StatusServiceUnavailable
	}
	b.answer(w, reason, code, b.c.Sentence(reason))
}

// answer writes a refusal: code, the reason header and sentence.
func (b *broker) answer(w http.ResponseWriter, reason policy.Reason, code int, sentence string) {
	h := w.Header()
	if reason == policy.SecretGuessed {
		h.Set("Connection", "close") // HTTP/2 too: net/http sends GOAWAY for it
	}
	h.Set(ReasonHeader, string(reason))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, sentence+"\n")
}

// reqState is what a request's forwarding learns, for its audit event.
type reqState struct {
	seq uint64
	// method and path are the request's as the audit log holds them: any
	// secret's value replaced by [NAME] (recorded).
	method, path string
	sent         bool // its record was written and it went to the origin
	used         []string
	echoes       []pair
	reason       policy.Reason
	err          string
	status       int // the origin's, as relayed
	// trailerMisdirected is set by the transport's goroutine reading the
	// request body, when the trailer names another host's secret.
	trailerMisdirected atomic.Bool
	// settle reads the rest of a body the guard found a value in and
	// quarantines (settleGuess); settleOnce runs it once, on the
	// handler's goroutine.
	settle   func(name string)
	settled  bool
	finished atomic.Bool // the handler is done: a later hit trips at once
	// guessed is the name of the secret whose value the request body (or
	// its trailer) carried, set by the transport's goroutine reading it.
	guessed atomic.Pointer[string]
	// noncanonical is the sentence of the canonical-MIME rule the
	// request body broke (mimeshape.go), set by the transport's
	// goroutine reading it.
	noncanonical atomic.Pointer[string]
}

// settleOnce settles a request the guard found a value in, once: the
// rest of its body is read, then the integration is quarantined.
func (st *reqState) settleOnce() {
	name := st.guessed.Load()
	if name == nil || st.settled || st.settle == nil {
		return
	}
	st.settled = true
	st.settle(*name)
}

type stateKey struct{}

func stateOf(ctx context.Context) *reqState {
	if st, ok := ctx.Value(stateKey{}).(*reqState); ok {
		return st
	}
	return &reqState{}
}

// errTrailerMisdirected ends a request body whose trailer carries another
// host's placeholder: the transport aborts the request, so the trailer is
// never written to the origin.
var errTrailerMisdirected = errors.New("the request trailer carries the placeholder of a secret bound to other hosts")

// trailerCheck reads a request body and, at its end (when the trailer has
// arrived), refuses a trailer that names another host's secret. The
// request was forwarded by then; failing the body's read is what keeps the
// trailer from the origin.
type trailerCheck struct {
	io.ReadCloser
	trailer *http.Request // its Trailer is filled in when the body ends
	unbound []policy.Secret
	st      *reqState
}

func (c *trailerCheck) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if err == io.EOF && misdirectedTrailer(c.trailer.Trailer, c.unbound) {
		c.st.trailerMisdirected.Store(true)
		return n, errTrailerMisdirected
	}
	return n, err
}

// countingReader counts a request body's bytes.
type countingReader struct {
	io.ReadCloser
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n += int64(n)
	return n, err
}

// countingWriter counts a response's status and body bytes; Unwrap lets
// http.ResponseController reach Flush and Hijack underneath. It scrubs
// every header it sends: ReverseProxy relays an informational (1xx)
// response's header straight to it, never through modifyResponse.
type countingWriter struct {
	http.ResponseWriter
	scrub  func(http.Header)
	status int
	n      int64
}

func (c *countingWriter) WriteHeader(code int) {
	c.scrub(c.ResponseWriter.Header())
	if c.status == 0 && code >= 200 || code == http.StatusSwitchingProtocols {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
