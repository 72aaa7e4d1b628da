package broker

import (
	"bytes"
	"mime"
	"strings"
)

// mimeShape checks the structure of a multipart/* or message/* body as it
// streams, beside the views and with no copy of the body: only a header
// block (at most maxHeaderBlock bytes) or the start of a line that may be
// a delimiter is held. The rules (canonical.go says why):
//   - outside part bodies (preamble, epilogue, delimiter lines, header
//     blocks) a line ends with CRLF (RFC 2046), never a lone CR (Python's
//     email parser ends a line there, Go's does not) nor a bare LF (Go's
//     multipart reader, once its first delimiter line ended with CRLF,
//     takes no delimiter after a bare LF, and Python's does);
//   - a line that begins with a delimiter ("--" and a boundary in force),
//     after any line break (CR, LF or CRLF: the union of Go's and
//     Python's parsers), is a delimiter line: the delimiter, "--" for the
//     last, the line's end (no padding); and it follows CRLF (or begins the
//     body or a part's content), where every parser takes it for one;
//   - a header block is at most maxHeaderBlock bytes of printable-ASCII
//     field lines (none folded), with no encoded word, ended by
//     an empty line; its Content-Type (one at most) and
//     Content-Transfer-Encoding (one at most) follow canonicalType and
//     knownTransfer, a composite part's encoding is the identity, an
//     RFC 2231 parameter names an ASCII-compatible charset, and its
//     Content-Disposition parses and names no `_charset_` field;
//   - a multipart/* part pushes its boundary (at most maxNesting in force,
//     none a prefix of another), a message/* part's body begins with the
//     header block of the message it holds;
//   - a delimiter line is the innermost multipart's, and the body ends
//     after the close delimiter of every multipart in force.
//
// Each byte is looked at a bounded number of times: the work is linear
// in the body.
type mimeShape struct {
	delims [][]byte // "--" + boundary, innermost last
	// inMail[k] says the multipart of delims[k] lies within a message
	// (message/*), and email is that of the header block or part read
	// now: a transfer encoding other than the identity is allowed only
	// there (see encodedOutsideMail).
	inMail []bool
	email  bool
	mode   shapeMode
	strict bool // outside a part's content: only CRLF ends a line
	b64    bool // in the content of a part labelled base64: only its alphabet and '=' (checkBase64)
	padded bool // with b64: a '=' was seen, so only '=' may follow
	lineN  int  // with b64: the characters of the content line so far
	qp     bool // in the content of a part labelled quoted-printable (checkQP)
	qpEsc  int  // with qp: 1 after '=', 2 after '=' and a hex digit
	bad    string

	crPending bool   // the last byte was a CR, its LF not yet seen
	atStart   bool   // a line began: prefix is its start
	breakOK   bool   // the line began after CRLF, or begins the body or a part's content
	prefix    []byte // the start of the line, while it may be a delimiter
	carry     []byte // the line's last content bytes, where a delimiter may begin (noDelimiterWithin)
	join      []byte // noDelimiterWithin's scratch
	delim     int    // the delimiter a delimiter line began with
	rest      []byte // a delimiter line's bytes after the delimiter

	partHead bool   // the header block is a multipart part's (not a message's)
	block    []byte // the header block's current line
	blockN   int    // the header block's bytes so far
	fields   []headerField
}

type shapeMode uint8

const (
	shapeBody    shapeMode = iota // a part's body, a preamble or an epilogue
	shapeHeaders                  // a header block
	shapeDelim                    // the rest of a delimiter line
)

// headerField is one field of a header block.
type headerField struct{ name, value string }

const (
	maxHeaderBlock = 16 << 10
	maxNesting     = 8
)

// Sentences of the bad_request refusals of a body's structure.
const (
	lineEndSentence     = "egressd: a line of the MIME body outside a part's content ends with a lone CR or a bare LF, or a delimiter follows one; end every such line with CRLF (RFC 2046)"
	delimLineSentence   = "egressd: a line of the MIME body begins with a delimiter but is not a delimiter line (the delimiter, -- after the last, CRLF; no padding); choose a boundary that is not in the content"
	headerBlockSentence = "egressd: a part's header block is not printable-ASCII header fields (no encoded word, at most 16 KiB, a Content-Type and Content-Transfer-Encoding egressd reads, a charset of utf-8, us-ascii or iso-8859-1) ended by an empty line; send plain part headers, percent-encode a non-ASCII filename"
	nestingSentence     = "egressd: the MIME body nests multiparts deeper than 8 or with a boundary that begins another; use distinct boundaries"
	unfinishedSentence  = "egressd: the MIME body ends before its closing delimiter (or inside a header block); send the whole body"
	midDelimSentence    = "egressd: the MIME body holds a delimiter (\"--\" and a boundary in force) inside a line or a part header; some parsers (Java's commons-fileupload, Werkzeug) begin a part there where others read on: choose a boundary that is not in the content"
	partEscapeSentence  = "egressd: a part header holds a backslash or '&#'; parsers read different escapes there (Python's email drops a backslash before any character, formidable decodes &#NNNN; in a filename): percent-encode such characters in a filename (RFC 7578)"
	entitySentence      = "egressd: the body declares an XML entity (<!ENTITY): its parser expands it where egressd does not read it; send the document without an internal DTD"
	emptyHeadSentence   = "egressd: a part of the MIME body has an empty header block; give each part its header fields (a form part its Content-Disposition, RFC 7578): Werkzeug and Rack read the first lines of a part without headers as its headers"
	encodedOutsideMail  = "egressd: a part of a multipart body outside any message/* part carries a Content-Transfer-Encoding other than 7bit, 8bit or binary; RFC 7578 asks senders not to, and form parsers decode it read by read, differently from the stream: send the part's bytes as they are (binary)"
	qpSentence          = "egressd: a part labelled Content-Transfer-Encoding: quoted-printable holds a '=' that is neither =XX nor a soft break ('=' CRLF), or a line not ended by CRLF; send it as RFC 2045 encoders write it"
	base64Sentence      = "egressd: a part labelled Content-Transfer-Encoding: base64 holds a byte outside the base64 alphabet and '=', more after its '=' padding, or a line that is not whole four-character groups; send its content as one padded base64 stream in lines (RFC 2045)"
)

// newMIMEShape checks a body of Content-Type mediatype (canonicalType's
// result), or returns nil for a body that has no MIME structure.
func newMIMEShape(mediatype, boundary string) *mimeShape {
	s := &mimeShape{strict: true}
	switch {
	case strings.HasPrefix(mediatype, "multipart/"):
		s.delims, s.inMail = [][]byte{[]byte("--" + boundary)}, []bool{false}
		s.atStart, s.breakOK = true, true
	case strings.HasPrefix(mediatype, "message/"):
		s.mode, s.email = shapeHeaders, true
	default:
		return nil
	}
	return s
}

// feed checks b, the next bytes of the body, and gives the sentence of a
// refusal once a rule is broken (then for good).
func (s *mimeShape) feed(b []byte) string {
	for i := 0; i < len(b) && s.bad == ""; i++ {
		if s.mode == shapeBody && !s.atStart && !s.crPending {
			// Within a line: skip to its end at memory speed.
			k := bytes.IndexAny(b[i:], "\r\n")
			if k < 0 {
				s.checkContent(b[i:])
				return s.bad
			}
			if s.checkContent(b[i : i+k]); s.bad != "" {
				return s.bad
			}
			i += k
		}
		s.step(b[i])
	}
	return s.bad
}

// end gives the sentence of a refusal of a body that ends here, or "".
func (s *mimeShape) end() string {
	if s.bad != "" {
		return s.bad
	}
	if s.crPending && !s.loose() {
		s.bad = lineEndSentence
		return s.bad
	}
	if s.mode == shapeDelim {
		s.endDelimLine(false)
	}
	if s.bad == "" && (len(s.delims) > 0 || s.mode == shapeHeaders) {
		s.bad = unfinishedSentence
	}
	return s.bad
}

func (s *mimeShape) step(c byte) {
	if s.crPending {
		s.crPending = false
		if c == '\n' {
			s.lineEnded(true)
			return
		}
		// A lone CR ended the line.
		if !s.loose() {
			s.bad = lineEndSentence
			return
		}
		s.lineEnded(false)
	}
	switch c {
	case '\r':
		s.crPending = true
		return
	case '\n': // a bare LF
		if !s.loose() {
			s.bad = lineEndSentence
			return
		}
		s.lineEnded(false)
		return
	}
	switch s.mode {
	case shapeHeaders:
		s.headerByte(c)
	case shapeDelim:
		s.delimByte(c)
	default:
		s.bodyByte(c)
	}
}

// loose reports a part's content, where any line break may be.
func (s *mimeShape) loose() bool { return s.mode == shapeBody && !s.strict }

// lineEnded follows a line break: crlf says it was CRLF.
func (s *mimeShape) lineEnded(crlf bool) {
	s.carry = s.carry[:0]
	switch s.mode {
	case shapeHeaders:
		s.headerLine()
	case shapeDelim:
		s.endDelimLine(true)
	default:
		if s.atStart { // a short line that could have been a delimiter: content
			s.checkContent(s.prefix)
		}
		if s.bad == "" {
			s.contentLineEnded(crlf)
		}
		s.atStart, s.breakOK, s.prefix = true, crlf, s.prefix[:0]
	}
}

// bodyByte reads c, not CR or LF, in a part's body, a preamble or an
// epilogue.
func (s *mimeShape) bodyByte(c byte) {
	if !s.atStart {
		return
	}
	s.prefix = append(s.prefix, c)
	for k, d := range s.delims {
		if !bytes.HasPrefix(d, s.prefix) {
			continue
		}
		if len(s.prefix) == len(d) {
			if !s.breakOK {
				s.bad = lineEndSentence
				return
			}
			s.mode, s.delim, s.rest, s.atStart = shapeDelim, k, s.rest[:0], false
		}
		return
	}
	s.checkContent(s.prefix) // no delimiter after all: content
	s.atStart, s.prefix = false, s.prefix[:0]
}

// delimByte reads c, not CR or LF, after a delimiter on its line.
func (s *mimeShape) delimByte(c byte) {
	s.rest = append(s.rest, c)
	if !delimTail(s.rest, false) {
		s.bad = delimLineSentence
	}
}

// delimTail reports whether rest (what follows a delimiter on its line)
// may still be, or is (whole), "--" or nothing. RFC 2046's transport
// padding (blanks) is refused: Node's busboy takes a padded line for no
// delimiter at all, so Go's and Python's parts would not be its.
func delimTail(rest []byte, whole bool) bool {
	switch string(rest) {
	case "", "--":
		return true
	case "-":
		return !whole
	}
	return false
}

// endDelimLine ends a delimiter line (lf: at a line break, else at the
// body's end): a close delimiter closes its multipart, another begins a
// part's header block. Either must be the innermost multipart's: every
// one inside it is closed first.
func (s *mimeShape) endDelimLine(lf bool) {
	if !delimTail(s.rest, true) {
		s.bad = delimLineSentence
		return
	}
	if s.delim != len(s.delims)-1 { // an outer delimiter: a multipart inside was left open
		s.bad = unfinishedSentence
		return
	}
	if bytes.HasPrefix(s.rest, []byte("--")) {
		s.delims, s.inMail = s.delims[:s.delim], s.inMail[:s.delim]
		s.mode, s.strict, s.atStart, s.breakOK, s.prefix, s.b64, s.qp = shapeBody, true, lf, true, s.prefix[:0], false, false
		return
	}
	s.beginHeaders()
	s.email, s.partHead = s.inMail[s.delim], true
}

func (s *mimeShape) beginHeaders() {
	s.mode, s.block, s.blockN, s.fields, s.b64, s.qp, s.partHead = shapeHeaders, s.block[:0], 0, s.fields[:0], false, false, false
}

// headerByte reads c, not CR or LF, in a header block.
func (s *mimeShape) headerByte(c byte) {
	s.blockN++
	if s.blockN > maxHeaderBlock || (c < ' ' || c > '~') && c != '\t' {
		s.bad = headerBlockSentence
		return
	}
	s.block = append(s.block, c)
}

// headerLine reads the header block's line just ended.
func (s *mimeShape) headerLine() {
	for _, d := range s.delims { // bytes against bytes: no copy per delimiter per line (round 44)
		if bytes.Contains(s.block, d) {
			s.bad = midDelimSentence
			return
		}
	}
	line := string(s.block)
	s.block = s.block[:0]
	s.blockN += 2
	if strings.Contains(line, "=?") {
		s.bad = headerBlockSentence
		return
	}
	// Round 44: filename="\s\k…" is a guess list to Python's email
	// (policy default), which drops a backslash before any character, and
	// "&#0115;&#0107;…" one to formidable; both were bytes to the guard.
	if strings.Contains(line, `\`) || strings.Contains(line, "&#") {
		s.bad = partEscapeSentence
		return
	}
	switch {
	case line == "":
		s.endHeaders()
	case line[0] == ' ' || line[0] == '\t':
		// A folded line: Go's textproto joins it with one space, Python's
		// email keeps its blanks, so a folded boundary is two boundaries.
		s.bad = headerBlockSentence
	default:
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			s.bad = headerBlockSentence
			return
		}
		s.fields = append(s.fields, headerField{strings.ToLower(name), value})
	}
}

// plainDisposition reports a Content-Disposition that parses, and names
// no `_charset_` field: RFC 7578 (4.6) lets such a field set the charset
// other fields are decoded in, which a parser may honour unasked.
func plainDisposition(v string) bool {
	_, params, err := mime.ParseMediaType(v)
	return err == nil && !strings.EqualFold(params["name"], "_charset_")
}

// endHeaders judges the header block just ended and begins what follows.
//
// A part's header block is never empty (round 43): Werkzeug and Rack look
// for the blank line that ends a part's headers from the delimiter line's
// own CRLF on, so after an empty block they read the part's first content
// lines as its headers, a charset (cp037, utf-16) the check never saw.
// Every form part has a Content-Disposition (RFC 7578), and honest clients
// label the parts of other multiparts.
func (s *mimeShape) endHeaders() {
	if s.partHead && len(s.fields) == 0 {
		s.bad = emptyHeadSentence
		return
	}
	var ct, cte []string
	for _, f := range s.fields {
		switch f.name {
		case "content-type":
			ct = append(ct, f.value)
		case "content-transfer-encoding":
			cte = append(cte, f.value)
		case "content-disposition":
			if !plainDisposition(f.value) {
				s.bad = headerBlockSentence
				return
			}
		}
		if !extendedCharsets(f.value) || !noContinuations(f.value) {
			s.bad = headerBlockSentence
			return
		}
	}
	if len(ct) > 1 || len(cte) > 1 {
		s.bad = headerBlockSentence
		return
	}
	transfer := ""
	if len(cte) == 1 {
		transfer = cte[0]
		if !knownTransfer(transfer) {
			s.bad = headerBlockSentence
			return
		}
	}
	mediatype, boundary := "text/plain", ""
	if len(ct) == 1 {
		var ok bool
		if mediatype, boundary, ok = canonicalType(ct[0]); !ok {
			s.bad = headerBlockSentence
			return
		}
	}
	composite := strings.HasPrefix(mediatype, "multipart/") || strings.HasPrefix(mediatype, "message/")
	if composite && !identityTransfer(transfer) {
		s.bad = headerBlockSentence
		return
	}
	if !s.email && !identityTransfer(transfer) {
		s.bad = encodedOutsideMail
		return
	}
	switch {
	case strings.HasPrefix(mediatype, "multipart/"):
		d := []byte("--" + boundary)
		if len(s.delims) >= maxNesting {
			s.bad = nestingSentence
			return
		}
		for _, in := range s.delims {
			if bytes.HasPrefix(in, d) || bytes.HasPrefix(d, in) {
				s.bad = nestingSentence
				return
			}
		}
		s.delims, s.inMail = append(s.delims, d), append(s.inMail, s.email)
		s.mode, s.strict = shapeBody, true
	case strings.HasPrefix(mediatype, "message/"):
		s.beginHeaders()
		s.email = true
		return
	default:
		s.mode, s.strict = shapeBody, false
		enc := strings.ToLower(strings.TrimSpace(transfer))
		s.b64, s.padded, s.lineN = enc == "base64", false, 0
		s.qp, s.qpEsc = enc == "quoted-printable", 0
	}
	s.atStart, s.breakOK, s.prefix = true, true, s.prefix[:0]
}
