package broker

import "bytes"

// The rules on the content of parts (and of a preamble and an epilogue):
// what lies between a delimiter line or a header block and the next.
// mimeShape calls checkContent with each line's content bytes, in order,
// and contentLineEnded at each line's end.

// base64Content marks the bytes a base64 part's content lines may hold:
// the standard alphabet and '='. A decoder that skips what is not in its
// alphabet reads other bytes away (Python's email drops '-' and '_',
// which the guard's alphabet view reads as the URL alphabet's '+' and '/':
// round 36 hid a guess list's base64 behind a '-' every four characters).
var base64Content = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") {
		t[c] = true
	}
	return t
}()

// checkContent checks a run of a part's content within one line (any
// content outside delimiter lines and header blocks: a preamble and an
// epilogue too). Each byte of a line's content comes here once, in order.
func (s *mimeShape) checkContent(content []byte) {
	s.noDelimiterWithin(content)
	s.checkBase64(content)
	s.checkQP(content)
}

// maxDelim is the longest delimiter: "--" and a boundary (canonicalType
// refuses one longer than RFC 2046's longest).
const maxDelim = len("--") + maxBoundary

// noDelimiterWithin refuses a delimiter in force inside a line: Go's and
// Python's parsers, and the shape check, take one only at a line's start,
// but Java's commons-fileupload finds the first delimiter anywhere in the
// preamble, and Werkzeug's needs no line break before it (round 42: a
// part begun by "junk--B" was a preamble to the guard, so its charset
// went unchecked, and an EBCDIC guess list came back decoded). The line's
// last bytes are carried so that a delimiter split between two reads, or
// between a line's start and the rest, is found too.
func (s *mimeShape) noDelimiterWithin(content []byte) {
	if len(s.delims) == 0 || len(content) == 0 || s.bad != "" {
		return
	}
	// Where the line's carried bytes meet content: one scratch join for
	// every delimiter (the longest in force decides its length), reused,
	// so a line costs no allocation whatever the nesting (round 44).
	var joined []byte
	if len(s.carry) > 0 {
		longest := 0
		for _, d := range s.delims {
			longest = max(longest, len(d))
		}
		s.join = append(append(s.join[:0], s.carry...), content[:min(len(content), longest-1)]...)
		joined = s.join
	}
	for _, d := range s.delims {
		if bytes.Contains(content, d) || bytes.Contains(joined, d) {
			s.bad = midDelimSentence
			return
		}
	}
	if len(content) >= maxDelim-1 {
		s.carry = append(s.carry[:0], content[len(content)-(maxDelim-1):]...)
		return
	}
	s.carry = append(s.carry, content...)
	if over := len(s.carry) - (maxDelim - 1); over > 0 {
		s.carry = s.carry[:copy(s.carry, s.carry[over:])]
	}
}

// contentLineEnded checks the end of a content line of a base64 or
// quoted-printable part: crlf says it ended with CRLF.
//
// In both, what RFC 2045 encoders write is all that passes, because
// decoders that decode read by read (or line by line) differ from those
// that decode the stream (round 38): formidable decodes each base64 line
// on its own, so lines of two characters each gave a byte apiece while
// the stream decoders (and the guard's alphabet view) read garbage; every
// base64 line is a whole number of four-character groups. python-multipart
// runs binascii.a2b_qp on each read, where '=' CR drops only to the read's
// end, while the guard's Python view read one stream; in a
// quoted-printable part every line ends with CRLF and every '=' is an
// escape of two hex digits or the '=' of a soft break ('=' CRLF).
func (s *mimeShape) contentLineEnded(crlf bool) {
	if s.b64 {
		if s.lineN%4 != 0 {
			s.bad = base64Sentence
		}
		s.lineN = 0
	}
	if s.qp {
		if !crlf || s.qpEsc == 2 {
			s.bad = qpSentence
		}
		s.qpEsc = 0
	}
}

// checkQP refuses a '=' in a quoted-printable part's content that is
// neither "=XX" (hex) nor the end of its line.
func (s *mimeShape) checkQP(content []byte) {
	if !s.qp {
		return
	}
	for _, c := range content {
		switch {
		case s.qpEsc > 0 && !isHex(c):
			s.bad = qpSentence
			return
		case s.qpEsc == 1:
			s.qpEsc = 2
		case s.qpEsc == 2:
			s.qpEsc = 0
		case c == '=':
			s.qpEsc = 1
		}
	}
}

// checkBase64 refuses content of a base64 part that holds another byte,
// or a character after its padding: a decoder that decodes each read on
// its own (python-multipart, behind Starlette and FastAPI) reads a '='
// mid-stream as the end of a group and decodes on, where the guard's
// alphabet view, and Go's and Python's email decoders, read one stream
// (round 37: a guess list base64-encoded two bytes at a time, a piece per
// HTTP chunk, came out whole at such an origin).
func (s *mimeShape) checkBase64(content []byte) {
	if !s.b64 {
		return
	}
	s.lineN += len(content)
	for _, c := range content {
		switch {
		case !base64Content[c], s.padded && c != '=':
			s.bad = base64Sentence
			return
		case c == '=':
			s.padded = true
		}
	}
}
