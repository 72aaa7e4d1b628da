package broker

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/egressd/egressd/internal/secretforms"
	"github.com/egressd/egressd/policy"
)

// A program never legitimately holds a secret's real value: it is given a
// placeholder, and egressd adds the value on the way out. A request it
// wrote that carries a value (raw, or a stable piece of its base64) is a
// guess or a leak. Let through, an origin that shows the program's data
// back made the response scrubber an oracle: a list of guesses posted as
// a body came back with the right one as the placeholder (round 24: a
// password in one request of 1 600 candidates). So such a request is
// refused (secret_guessed), and the integration's brokering is
// quarantined: every open brokered connection of it ends, and every later
// request to any bound host is refused, for the life of the process. A
// guess list in one request then tells the program one bit (some value
// was in it), never which line, and the operator reads which secret in
// the audit log, by name. The refusal is itself an answer, though: a
// program sending one guess per request learns that its last guess was
// right from the first refusal (an online guessing attack at the request
// rate, ended by the first hit; the README names it). Any reaction to a
// value in a request shows at that request, so no proxy can close it.
//
// Built tokens are not looked for here: the integration writes the
// placeholder, never the token. Transformed values (hex, reversed, split
// across fields an origin joins) are not recognised: a residual the
// README names.

// Quarantine is the brokering state one integration's connections share:
// once a request of any of them carried a value, it is tripped for good.
// It is safe for concurrent use.
type Quarantine struct {
	mu     sync.Mutex
	secret string // the name of the secret whose value tripped it; "" while clear
	open   map[*broker]func()
}

// NewQuarantine returns a clear quarantine; one serves an integration.
func NewQuarantine() *Quarantine { return &Quarantine{open: map[*broker]func(){}} }

// Tripped is the name of the secret whose value tripped q, or "".
func (q *Quarantine) Tripped() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.secret
}

// trip records that a request of by carried name's value, and ends every
// other open connection of the integration (by's ends after its refusal:
// the refusal asks for the connection to close).
func (q *Quarantine) trip(name string, by *broker) {
	q.mu.Lock()
	if q.secret == "" {
		q.secret = name
	}
	var ends []func()
	for b, end := range q.open {
		if b != by {
			ends = append(ends, end)
		}
	}
	q.mu.Unlock()
	for _, end := range ends {
		end()
	}
}

// join counts b's connection among the open ones, ended by end if q trips;
// leave takes it out. A connection that joins a tripped quarantine is
// refused request by request (check).
func (q *Quarantine) join(b *broker, end func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.open[b] = end
}

func (q *Quarantine) leave(b *broker) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.open, b)
}

// valueForm is one form of a secret's value a request must not carry.
type valueForm struct {
	name string
	form []byte
	// piece marks a stable piece of the value's standard base64, at
	// least MinBase64Piece long: the only forms looked for in the
	// alphabet view (alphabetView) too.
	piece bool
}

// valueForms are each secret's value and the stable pieces of its base64
// (the same patterns the response scrubber's first layer uses).
func valueForms(secrets []policy.Secret) []valueForm {
	var out []valueForm
	for _, sec := range secrets {
		if len(sec.Value) == 0 {
			continue
		}
		out = append(out, valueForm{name: sec.Name, form: sec.Value})
		for _, p := range encodedPairs(sec.Value, []byte(sec.Placeholder)) {
			out = append(out, valueForm{name: sec.Name, form: p.from})
		}
		for align := range 3 {
			if p := secretforms.StableBase64(base64.RawStdEncoding, align, sec.Value); len(p) >= secretforms.MinBase64Piece {
				out = append(out, valueForm{name: sec.Name, form: p, piece: true})
			}
		}
	}
	return out
}

// alphabetView appends to out the bytes of b in the base64 alphabets,
// the URL alphabet's '-' and '_' written as the standard '+' and '/',
// and nothing else: what a lenient decoder (Node's Buffer, Python's
// b64decode) decodes, base64 wrapped at any column (MIME, PEM), with
// junk between its characters, or in both alphabets at once. Only the
// stable pieces of the values' base64 are looked for in it (not the
// values: joined words would make them up from ordinary text). A piece
// is at least MinBase64Piece characters, 48 bits that only the value
// decides (a value of 8 bytes or more has pieces of 10 or more, 60
// bits): text that is not that value's base64 holds one by chance with
// a probability of about 2^-48 per position or less, so a chance match
// (a refusal and a quarantine for nothing) is negligible. One byte in,
// at most one out, no state across reads: a streamed body is viewed
// read by read.
func alphabetView(b, out []byte) []byte {
	n := len(out)
	out = slices.Grow(out, len(b))[:n+len(b)]
	for _, c := range b {
		// Branch-free: every byte is written, and kept only if in the
		// alphabet (the next one overwrites it otherwise).
		v := inAlphabet[c]
		out[n] = v
		n += int((v | -v) >> 7)
	}
	return out[:n]
}

// inAlphabet maps each byte of the base64 alphabets to what alphabetView
// writes for it, and every other byte to 0.
var inAlphabet = func() (t [256]byte) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") {
		t[c] = c
	}
	t['-'], t['_'] = '+', '/'
	return t
}()

// carriedPiece is the name of a secret a stable base64 piece of whose
// value s holds in its alphabet view, or "".
func carriedPiece(s string, forms []valueForm) string {
	view := string(alphabetView([]byte(s), nil))
	for _, f := range forms {
		if f.piece && strings.Contains(view, string(f.form)) {
			return f.name
		}
	}
	return ""
}

// carriedAnyhow is carriedValue, or failing it carriedPiece.
func carriedAnyhow(s string, forms []valueForm) string {
	if name := carriedValue(s, forms); name != "" {
		return name
	}
	return carriedPiece(s, forms)
}

// carriedValue is the name of a secret one of whose forms s holds, or "".
func carriedValue(s string, forms []valueForm) string {
	for _, f := range forms {
		if strings.Contains(s, string(f.form)) {
			return f.name
		}
	}
	return ""
}

// recorded is a field of a request the program wrote (its method, its
// path), as the audit log may hold it: each value form replaced by
// [NAME]. Where the guard found a value only once the field was
// percent-decoded or form-decoded, the decoded field is what is recorded,
// so no escaped value survives either. A field whose value the guard
// found only as a base64 piece broken up by other bytes (alphabetView)
// holds no piece that can be cut out: it is recorded as [NAME] alone.
func recorded(s string, forms []valueForm) string {
	s = replaceForms(s, forms)
	var form formDecoder
	for _, decoded := range []string{secretforms.PercentDecoded(s), string(form.decode([]byte(s), nil))} {
		if carriedValue(decoded, forms) != "" {
			s = replaceForms(secretforms.PercentDecoded(replaceForms(decoded, forms)), forms)
			break
		}
	}
	var again formDecoder
	for _, view := range []string{s, secretforms.PercentDecoded(s), string(again.decode([]byte(s), nil))} {
		if name := carriedPiece(view, forms); name != "" {
			return "[" + name + "]"
		}
	}
	return s
}

// replaceForms replaces each value form in s by its secret's [NAME].
func replaceForms(s string, forms []valueForm) string {
	for _, f := range forms {
		s = strings.ReplaceAll(s, string(f.form), "["+f.name+"]")
	}
	return s
}

// carriedFolded is carriedValue for a header field name, which is
// case-insensitive on the wire.
func carriedFolded(name string, forms []valueForm) string {
	name = strings.ToLower(name)
	for _, f := range forms {
		if strings.Contains(name, strings.ToLower(string(f.form))) {
			return f.name
		}
	}
	return ""
}

// guessedInHead is the name of a secret whose value the request's target
// (as sent, percent-decoded, and form-decoded) or a header field (name or value, as the
// program wrote it, before substitution) carries, or "".
func guessedInHead(r *http.Request, forms []valueForm) string {
	if len(forms) == 0 {
		return ""
	}
	target := r.Method + " " + r.RequestURI
	if name := carriedAnyhow(target, forms); name != "" {
		return name
	}
	if name := carriedAnyhow(secretforms.PercentDecoded(target), forms); name != "" {
		return name
	}
	var query formDecoder // a query's '+' is a space to a form decoder
	if name := carriedAnyhow(string(query.decode([]byte(target), nil)), forms); name != "" {
		return name
	}
	if name := guessedInHeader(r.Header, forms); name != "" {
		return name
	}
	// The declared trailer names (net/http moves the Trailer header into
	// r.Trailer's keys) go to the origin in the head, long before the
	// body's end, where the trailer's values are read.
	return guessedInHeader(r.Trailer, forms)
}

// guessedInHeader is guessedInHead for a header (or trailer) alone. A
// field name is compared with case folded on both sides: net/http stores
// names canonical (Sunshine2019!), egressd's HTTP/2 transport sends them
// lowercased and HTTP/1.1 canonical, and an origin may show back either.
func guessedInHeader(h http.Header, forms []valueForm) string {
	for name, values := range h {
		if n := carriedFolded(name, forms); n != "" {
			return n
		}
		for _, v := range values {
			if n := carriedAnyhow(v, forms); n != "" {
				return n
			}
		}
	}
	return ""
}

// errGuessed ends a request body that carried a secret's value: the
// transport aborts the request, so the origin never has it whole.
var errGuessed = errors.New("the request body carried the real value of a secret")

// maxGuessedBody bounds the body of a request whose value the guard found,
// read to its end before the program is answered (settleGuess): counted
// from the body's first byte, so where the cap falls does not depend on
// where the value was either.
const maxGuessedBody = 64 << 20

// guessGuard reads a request body and looks for every value form in it as
// it streams, one matcher per form (match.go: linear, state carried across
// reads), in the bytes as they are and as a form decoder reads them
// (percent-escapes decoded, '+' as a space: an origin that decodes a form
// body and shows a field back would otherwise hear a value the guard did
// not, `Summer2019%21`); and the values' stable base64 pieces in the
// alphabet view of both (alphabetView: wrapped base64, round 29). The read in which a form completes is withheld
// and fails, so the form's last byte never goes upstream and the request
// is never complete: a body sent with a length ends short, a chunked one
// without its last chunk, an HTTP/2 one with a reset. Nothing is buffered
// beyond one read.
//
// The program is not answered then (round 26: with one guess every 2 ms
// in one streamed body, the time of the 403 named the line): the body
// stays open for settleGuess to read to its end, so the guard's Close,
// which the transport calls once it gives up the request, leaves it open
// after a hit.
type guessGuard struct {
	io.ReadCloser
	trailer *http.Request // its Trailer is filled in when the body ends
	forms   []valueForm
	finds   []matcher // on the bytes as they are
	decoded []matcher // on the bytes form-decoded
	qp      []matcher // on the bytes quoted-printable-decoded; nil unless the body holds MIME parts (mimeParts)
	// pieces and decodedPieces look for the pieces (valueForm.piece) in
	// the alphabet view of the bytes, and of them form-decoded; nil for
	// other forms.
	pieces, decodedPieces []*matcher
	dec                   formDecoder
	qpDec                 qpDecoder
	scratch, qpOut, view  []byte
	ends                  []int
	hit                   func(name string) // called once, with the secret's name
	err                   error
	found                 atomic.Bool // hit was called: Close leaves the body to settleGuess
}

// Close closes the body, unless the guard found a value in it.
func (g *guessGuard) Close() error {
	if g.found.Load() {
		return nil
	}
	return g.ReadCloser.Close()
}

// fail ends the body's forwarding: name's value was in it.
func (g *guessGuard) fail(name string) (int, error) {
	g.err = errGuessed
	g.found.Store(true)
	g.hit(name)
	return 0, g.err
}

func newGuessGuard(body io.ReadCloser, forms []valueForm, trailer *http.Request, hit func(string)) *guessGuard {
	g := &guessGuard{ReadCloser: body, trailer: trailer, forms: forms, hit: hit}
	for _, f := range forms {
		g.finds = append(g.finds, matcher{pattern: f.form})
		g.decoded = append(g.decoded, matcher{pattern: f.form})
		if mimeParts(trailer.Header) {
			g.qp = append(g.qp, matcher{pattern: f.form})
		}
		var raw, dec *matcher
		if f.piece {
			raw, dec = &matcher{pattern: f.form}, &matcher{pattern: f.form}
		}
		g.pieces, g.decodedPieces = append(g.pieces, raw), append(g.decodedPieces, dec)
	}
	return g
}

func (g *guessGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.ReadCloser.Read(p)
	g.scratch = g.dec.decode(p[:n], g.scratch[:0])
	if g.qp != nil {
		g.qpOut = g.qpDec.decode(p[:n], g.qpOut[:0])
	}
	for i := range g.finds {
		g.ends = g.finds[i].feed(p[:n], g.ends[:0])
		g.ends = g.decoded[i].feed(g.scratch, g.ends)
		if g.qp != nil {
			g.ends = g.qp[i].feed(g.qpOut, g.ends)
		}
		if len(g.ends) > 0 {
			return g.fail(g.forms[i].name)
		}
	}
	g.view = alphabetView(p[:n], g.view[:0])
	for k, matchers := range [][]*matcher{g.pieces, g.decodedPieces} {
		if k == 1 && !bytes.Equal(g.scratch, p[:n]) { // nothing form-decoded: the same view
			g.view = alphabetView(g.scratch, g.view[:0])
		}
		for i, m := range matchers {
			if m == nil {
				continue
			}
			if g.ends = m.feed(g.view, g.ends[:0]); len(g.ends) > 0 {
				return g.fail(g.forms[i].name)
			}
		}
	}
	if err == io.EOF {
		if name := guessedInHeader(g.trailer.Trailer, g.forms); name != "" {
			return g.fail(name)
		}
	}
	return n, err
}

// formDecoder decodes application/x-www-form-urlencoded bytes as they
// stream: %XX as the byte, '+' as a space, anything else (a '%' not
// followed by two hex digits included) as it is. Its state is the escape
// begun at the end of the last read.
type formDecoder struct {
	pending []byte // "%" or "%X", awaiting the rest of an escape
}

func (d *formDecoder) decode(b, out []byte) []byte {
	for len(b) > 0 {
		if len(d.pending) == 0 {
			// Bytes up to the next '%' or '+' are themselves: copied at
			// memory speed, not one by one.
			k := bytes.IndexAny(b, "%+")
			if k < 0 {
				return append(out, b...)
			}
			out = append(out, b[:k]...)
			b = b[k:]
		}
		c := b[0]
		b = b[1:]
		if len(d.pending) > 0 {
			if !isHex(c) {
				out = append(out, d.pending...)
				d.pending = d.pending[:0]
			} else if len(d.pending) == 2 {
				out = append(out, unhex(d.pending[1])<<4|unhex(c))
				d.pending = d.pending[:0]
				continue
			} else {
				d.pending = append(d.pending, c)
				continue
			}
		}
		switch c {
		case '%':
			d.pending = append(d.pending, c)
		case '+':
			out = append(out, ' ')
		default:
			out = append(out, c)
		}
	}
	return out
}

// qpDecoder decodes quoted-printable (RFC 2045) as it streams, as Go's
// mime/quotedprintable (and so any Go origin's multipart form parser) and
// mail libraries read it: =XX as the byte, a soft line break ('=', any
// blanks, then LF, or CR and anything up to the LF, as Python reads it)
// as nothing, anything else as it is. A multipart
// part sent with Content-Transfer-Encoding: quoted-printable is decoded by
// the origin without being asked (round 31: a guess list written =XX, or
// cut by one soft break, reached the origin whole, and its echo was
// scrubbed). Its state is the escape begun at the end of the last read;
// a run of blanks after '=' longer than maxQPBlanks is taken as it is.
type qpDecoder struct {
	pending []byte // "=", "=X", or "=" then blanks and perhaps '\r'
}

const maxQPBlanks = 128

// mimeParts reports whether a body with header h holds MIME parts, where a
// part may carry its own Content-Transfer-Encoding (multipart/*, message/*):
// the bodies an origin's parser decodes quoted-printable in. Other bodies
// are not read that way: the view costs the guard about as much again,
// and no parser applies a part's transfer encoding without parts.
// Every Content-Type field counts (origins differ on which of two they
// take), and the type is looked for anywhere in it: a media-type parser
// trims more than blanks (Go's drops a leading U+00A0 or U+0085, round 32).
func mimeParts(h http.Header) bool {
	for _, v := range h.Values("Content-Type") {
		ct := strings.ToLower(v)
		if strings.Contains(ct, "multipart/") || strings.Contains(ct, "message/") {
			return true
		}
	}
	return false
}

func (d *qpDecoder) decode(b, out []byte) []byte {
	for len(b) > 0 {
		if len(d.pending) == 0 {
			k := bytes.IndexByte(b, '=')
			if k < 0 {
				return append(out, b...)
			}
			out = append(out, b[:k]...)
			d.pending = append(d.pending, '=')
			b = b[k+1:]
			continue
		}
		c := b[0]
		b = b[1:]
		last := d.pending[len(d.pending)-1]
		switch {
		case len(d.pending) == 1 && isHex(c):
			d.pending = append(d.pending, c)
			continue
		case len(d.pending) == 2 && isHex(d.pending[1]):
			if isHex(c) {
				out = append(out, unhex(d.pending[1])<<4|unhex(c))
				d.pending = d.pending[:0]
				continue
			}
		case c == '\n':
			// "=", blanks, an optional CR, then LF: a soft line break.
			d.pending = d.pending[:0]
			continue
		case last != '\r' && (c == ' ' || c == '\t') && len(d.pending) < maxQPBlanks:
			d.pending = append(d.pending, c)
			continue
		case last != '\r' && c == '\r':
			d.pending = append(d.pending, c)
			continue
		case bytes.IndexByte(d.pending, '\r') > 0 && len(d.pending) < maxQPBlanks:
			// Python's decoder takes '=', CR, then anything up to the LF as
			// a soft break (round 32): so does the guard.
			d.pending = append(d.pending, c)
			continue
		}
		// Not an escape after all: '=' and what followed are themselves,
		// and c starts afresh.
		out = append(out, d.pending...)
		d.pending = d.pending[:0]
		if c == '=' {
			d.pending = append(d.pending, c)
		} else {
			out = append(out, c)
		}
	}
	return out
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
