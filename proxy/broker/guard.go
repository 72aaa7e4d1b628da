package broker

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
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
	// A value the other views find (a JSON or HTML escape, %u) cannot be
	// cut out of the field as written: it is recorded as [NAME] alone
	// (round 50: "sk\u002dlive…" was recorded as written, the value
	// readable in the audit log).
	for _, view := range decodedViews(s, forms) {
		if name := carriedAnyhow(view, forms); name != "" {
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
//
// h is the header to read: r.Header, or the part of it the connection
// has not already found clean (cleanFields).
func guessedInHead(r *http.Request, h http.Header, forms []valueForm) string {
	if len(forms) == 0 {
		return ""
	}
	target := r.Method + " " + r.RequestURI
	if name := carriedAnyhow(target, forms); name != "" {
		return name
	}
	for _, view := range decodedViews(target, forms) {
		if name := carriedAnyhow(view, forms); name != "" {
			return name
		}
	}
	if name := guessedInHeader(h, forms); name != "" {
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
//
// Every name, and every value, is read in one pass, a line each (no form
// holds a line break, and each view ends an escape at one as at a value's
// end): the views then cost per byte of the head, not per field (round
// 46: twelve thousand empty fields, within the head's 64 KiB, cost fifty
// times their bytes as a body, CPU one integration took from another).
func guessedInHeader(h http.Header, forms []valueForm) string {
	if len(h) == 0 {
		return ""
	}
	var names, values strings.Builder
	for name, vs := range h {
		names.WriteString(name)
		names.WriteByte('\n')
		lines, joined := distinctLines(vs, ", ") // a value sent fifteen times in a few bytes is read once (round 49)
		for _, v := range lines {
			values.WriteString(v)
			values.WriteByte('\n')
		}
		if len(vs) > 1 {
			values.WriteString(joined)
			values.WriteByte('\n')
		}
	}
	if n := carriedFolded(names.String(), forms); n != "" {
		return n
	}
	// As written, and decoded as cookie and form parsers decode a value
	// (Rack's cookies are form-decoded, round 44).
	for _, view := range decodedViews(values.String(), forms) {
		if n := carriedAnyhow(view, forms); n != "" {
			return n
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
	// mime reads the body through further decoders: bodyViews (chains.go),
	// and, for a body that holds MIME parts, each decoder an origin
	// applies to a part (mimeviews.go).
	mime []*viewMatchers
	// shape checks the structure of a multipart/* or message/* body
	// (mimeshape.go); nil for other bodies. A body that breaks its rules
	// fails as a guess does, but for its form: noncanonical is called
	// with the refusal's sentence (no secret is involved, nothing is
	// settled or quarantined).
	shape        *mimeShape
	noncanonical func(sentence string)
	// entities looks for an XML entity declaration in the body, NULs
	// dropped (UTF-16 too): a document's own entities are expanded by
	// its parser (xml.etree, lxml, Java's) where no view reads them
	// (round 50), so a body declaring one is refused as noncanonical.
	entities matcher
	unNULed  []byte
	// pieces and decodedPieces look for the pieces (valueForm.piece) in
	// the alphabet view of the bytes, and of them form-decoded; nil for
	// other forms.
	pieces, decodedPieces []*matcher
	dec                   formDecoder
	scratch, view         []byte
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
	g := &guessGuard{ReadCloser: body, trailer: trailer, forms: forms, hit: hit, entities: matcher{pattern: []byte("<!ENTITY")}}
	for _, f := range forms {
		g.finds = append(g.finds, matcher{pattern: f.form})
		g.decoded = append(g.decoded, matcher{pattern: f.form})
		var raw, dec *matcher
		if f.piece {
			raw, dec = &matcher{pattern: f.form}, &matcher{pattern: f.form}
		}
		g.pieces, g.decodedPieces = append(g.pieces, raw), append(g.decodedPieces, dec)
	}
	for _, v := range bodyViews(forms) {
		g.mime = append(g.mime, newViewMatchers(v, forms))
	}
	if mimeParts(trailer.Header) {
		keep := 0
		for _, f := range forms {
			keep = max(keep, len(f.form))
		}
		for _, v := range mimeViews(keep) {
			g.mime = append(g.mime, newViewMatchers(v, forms))
		}
	}
	// The request's Content-Type was judged by canonicalHead before its
	// body is read: a refused one leaves the body unread.
	if cts := trailer.Header.Values("Content-Type"); len(cts) == 1 {
		if mt, boundary, ok := canonicalType(cts[0]); ok {
			g.shape = newMIMEShape(mt, boundary)
		}
	}
	return g
}

// errNoncanonical ends a request body that breaks the canonical-MIME
// rules: the transport aborts the request, so the origin never has it
// whole.
var errNoncanonical = errors.New("the request body is not canonical MIME")

// refuseShape ends the body's forwarding: it broke the rule sentence
// names.
func (g *guessGuard) refuseShape(sentence string) (int, error) {
	g.err = errNoncanonical
	if g.noncanonical != nil {
		g.noncanonical(sentence)
	}
	return 0, g.err
}

// viewMatchers looks for every value form in what a view gives, and for
// the pieces in its alphabet view too (base64 of a value, written with
// escapes or soft breaks inside, or uuencoded).
type viewMatchers struct {
	view       mimeView
	finds      []matcher
	pieces     []*matcher // nil for forms that are not pieces
	out, alpha []byte
	tail       []byte
}

func newViewMatchers(v mimeView, forms []valueForm) *viewMatchers {
	m := &viewMatchers{view: v}
	for _, f := range forms {
		m.finds = append(m.finds, matcher{pattern: f.form})
		var piece *matcher
		if f.piece {
			piece = &matcher{pattern: f.form}
		}
		m.pieces = append(m.pieces, piece)
	}
	return m
}

// feed reads b through the view and returns the index of a form found,
// or -1. ends is scratch; raw and rawPieces are the guard's matchers of
// the bytes as they are, already fed b.
func (m *viewMatchers) feed(b []byte, ends []int, raw []matcher, rawPieces []*matcher) int {
	m.out = m.view.decode(b, m.out[:0])
	if bytes.Equal(m.out, b) {
		return m.feedAsRaw(ends, raw, rawPieces)
	}
	for i := range m.finds {
		if len(m.finds[i].feed(m.out, ends[:0])) > 0 {
			return i
		}
	}
	m.alpha = alphabetView(m.out, m.alpha[:0])
	for i, piece := range m.pieces {
		if piece != nil && len(piece.feed(m.alpha, ends[:0])) > 0 {
			return i
		}
	}
	return m.atEnd(ends)
}

// feedAsRaw is feed for a read the view gave as it is (most reads, for
// most views: nothing in them to decode). Only a form that began in an
// earlier read, where the view and the bytes differed, can end in it
// unseen by the raw matchers, and it ends within its first len(form)-1
// bytes; past them the streams end alike, so the view's matchers are
// where the raw ones are. Feeding every view every byte cost the guard
// four times its plain reading once each escape syntax had a view
// (round 46).
func (m *viewMatchers) feedAsRaw(ends []int, raw []matcher, rawPieces []*matcher) int {
	for i := range m.finds {
		f := &m.finds[i]
		head := m.out[:min(len(m.out), len(f.pattern)-1)]
		if len(f.feed(head, ends[:0])) > 0 {
			return i
		}
		if len(head) < len(m.out) {
			f.state = raw[i].state
		}
	}
	m.alpha = alphabetView(m.out, m.alpha[:0])
	for i, piece := range m.pieces {
		if piece == nil {
			continue
		}
		head := m.alpha[:min(len(m.alpha), len(piece.pattern)-1)]
		if len(piece.feed(head, ends[:0])) > 0 {
			return i
		}
		if len(head) < len(m.alpha) {
			piece.state = rawPieces[i].state
		}
	}
	return m.atEnd(ends)
}

// atEnd is the index of a form the view's output would complete if the
// body ended here (mimeView.flushed), or -1; the matchers' states are
// left as they are (each is tried on a copy: a table the copy grows is
// the same one the matcher would build).
func (m *viewMatchers) atEnd(ends []int) int {
	m.tail = m.view.flushed(m.tail[:0])
	if len(m.tail) == 0 {
		return -1
	}
	for i := range m.finds {
		if end := m.finds[i]; len(end.feed(m.tail, ends[:0])) > 0 {
			return i
		}
	}
	m.tail = alphabetView(m.tail, m.tail)[len(m.tail):]
	for i, piece := range m.pieces {
		if piece == nil {
			continue
		}
		if end := *piece; len(end.feed(m.tail, ends[:0])) > 0 {
			return i
		}
	}
	return -1
}

func (g *guessGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.ReadCloser.Read(p)
	g.scratch = g.dec.decode(p[:n], g.scratch[:0])
	for i := range g.finds {
		g.ends = g.finds[i].feed(p[:n], g.ends[:0])
		g.ends = g.decoded[i].feed(g.scratch, g.ends)
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
	for _, m := range g.mime {
		if i := m.feed(p[:n], g.ends, g.finds, g.pieces); i >= 0 {
			return g.fail(g.forms[i].name)
		}
	}
	if err == io.EOF {
		if name := guessedInHeader(g.trailer.Trailer, g.forms); name != "" {
			return g.fail(name)
		}
	}
	// After the views: a value found in the same read is a guess,
	// whatever the body's form.
	g.unNULed = nulsDropped{}.decode(p[:n], g.unNULed[:0])
	if len(g.entities.feed(g.unNULed, g.ends[:0])) > 0 {
		return g.refuseShape(entitySentence)
	}
	if g.shape != nil {
		sentence := g.shape.feed(p[:n])
		if sentence == "" && err == io.EOF {
			sentence = g.shape.end()
		}
		if sentence != "" {
			return g.refuseShape(sentence)
		}
	}
	return n, err
}
