package broker

import "bytes"

// The views of a body holding MIME parts (mimeParts): each part may carry
// its own Content-Transfer-Encoding, which the origin's parser undoes
// without being asked. Each view below is one real decoder's, emulated
// exactly as it streams, with no cap past which bytes pass through
// (round 33: the guard's one quoted-printable decoder mixed Go's and
// Python's rules and gave up after 128 bytes, and every place it differed
// from a real decoder hid a guess list). The guard is no MIME parser: each
// view reads the whole body as though it were one part so encoded. A
// part's bytes are a run of whole lines of the body, and each view's
// state is back at a line's start by the part's first byte (the blank
// line ending its header), so what the origin decodes from the part is a
// run of what the view gives, and a value in it is found there.

// mimeView decodes a stream; decode appends what b decodes to and returns
// it, the state carried from one call to the next.
// flushed appends to out what the decoder would give if the data ended
// now (an "=X" held for a third byte that never comes), leaving its
// state as it is: the guard checks it at the end of every read, so a
// value completed only by the data's end is found in the read that ends
// it, before that read goes upstream.
type mimeView interface {
	decode(b, out []byte) []byte
	flushed(out []byte) []byte
}

// mimeViews are the views the guard reads a MIME body through. keep is the
// longest value form: a run of blanks longer than 2*keep is shortened.
func mimeViews(keep int) []mimeView {
	return []mimeView{
		&goQP{keep: keep},
		&pythonQP{},
		&uuView{},
		&uuView{lfOnly: true},
	}
}

// blankRun holds a run of bytes a decoder drops if the line ends after
// them and keeps otherwise. A run longer than 2*keep is kept as its first
// keep bytes and its last keep bytes: a value form is at most keep long,
// so one that overlaps the run's start or end overlaps only what is kept.
// Only a value made of nothing but blanks and CRs lying wholly inside the
// dropped middle is lost (no credential is that), and the join of the two
// halves could only make up such a value.
type blankRun struct {
	keep  int
	bytes []byte
}

func (r *blankRun) add(c byte) {
	r.bytes = append(r.bytes, c)
	if k := max(r.keep, 1); len(r.bytes) >= 3*k {
		r.bytes = append(r.bytes[:k], r.bytes[len(r.bytes)-k:]...)
	}
}

func (r *blankRun) last() byte {
	if len(r.bytes) == 0 {
		return 0
	}
	return r.bytes[len(r.bytes)-1]
}

// goLine is the longest line Go's quoted-printable reader reads whole: its
// bufio.Reader's 4096 bytes. A longer line is read as a line of its first
// 4096 bytes, and the reader fails after it.
const goLine = 4096

// goQP reads quoted-printable as Go's mime/quotedprintable.Reader does
// (GOROOT/src/mime/quotedprintable/reader.go; what a Go origin's
// multipart form parser applies to a part labelled quoted-printable). It
// reads a line (up to LF, or goLine bytes) and trims the blanks, tabs, CRs
// and LF at its end; if the trimmed line ends with '=', that '=' and the
// trimmed bytes are a soft break (nothing); else the line ending is kept
// as CRLF if the line ended so, LF otherwise. In what is left, '=' and
// two hex digits (either case) is the byte; any other '=' is itself,
// except one before a CR or at the end of what is left, where the reader
// fails. Where Go's reader fails (also at a control byte, or after a line
// of goLine bytes) it gives nothing more; the view goes on as though it
// had not, so what Go gives is always a run of what the view gives.
type goQP struct {
	keep    int
	state   goQPState
	hex     byte     // the digit after '=' in goEscHex
	blanks  blankRun // blanks, tabs and CRs held: dropped if the line ends after them
	lineLen int      // bytes of the line read so far
}

type goQPState uint8

const (
	goText     goQPState = iota // in a line; blanks may be held
	goEsc                       // after '='
	goEscHex                    // after '=' and a hex digit
	goEscBlank                  // after '=' and blanks held
)

func isBlankOrCR(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

func (d *goQP) decode(b, out []byte) []byte {
	d.blanks.keep = d.keep
	for len(b) > 0 {
		if d.state == goText && len(d.blanks.bytes) == 0 {
			// Bytes that are themselves, up to the next that is not, at
			// memory speed (within the line's goLine bytes).
			k := 0
			for k < len(b) && k < goLine-1-d.lineLen && plainQP[b[k]] {
				k++
			}
			out = append(out, b[:k]...)
			d.lineLen += k
			b = b[k:]
			if len(b) == 0 {
				break
			}
		}
		c := b[0]
		b = b[1:]
		d.lineLen++
		if c == '\n' {
			out = d.endLine(out, true)
			continue
		}
		out = d.step(c, out)
		if d.lineLen == goLine {
			out = d.endLine(out, false)
		}
	}
	return out
}

// plainQP marks the bytes goQP copies as they are in text.
var plainQP = func() (t [256]bool) {
	for c := range t {
		t[c] = c != '=' && c != '\n' && !isBlankOrCR(byte(c))
	}
	return t
}()

// step reads c, not LF, within a line.
func (d *goQP) step(c byte, out []byte) []byte {
	switch d.state {
	case goEsc:
		switch {
		case isHex(c):
			d.hex, d.state = c, goEscHex
			return out
		case isBlankOrCR(c):
			d.state = goEscBlank
			d.blanks.add(c)
			return out
		}
		out = append(out, '=') // before a byte not hex: '=' is itself
		d.state = goText
	case goEscHex:
		if isHex(c) {
			d.state = goText
			return append(out, unhex(d.hex)<<4|unhex(c))
		}
		out = append(out, '=', d.hex)
		d.state = goText
	case goEscBlank:
		if isBlankOrCR(c) {
			d.blanks.add(c)
			return out
		}
		out = append(out, '=') // '=' before blanks that do not end the line
		d.state = goText
	}
	// goText.
	switch {
	case isBlankOrCR(c):
		d.blanks.add(c)
	case c == '=':
		out = d.flushBlanks(out)
		d.state = goEsc
	default:
		out = append(d.flushBlanks(out), c)
	}
	return out
}

func (d *goQP) flushBlanks(out []byte) []byte {
	out = append(out, d.blanks.bytes...)
	d.blanks.bytes = d.blanks.bytes[:0]
	return out
}

// endLine ends the line: at an LF (lf), or after goLine bytes or at the
// end of the stream, where Go's reader reads the line as having no LF.
// Held blanks are trimmed; a trailing '=' (before blanks or not) is a soft
// break; "=X" is itself.
func (d *goQP) endLine(out []byte, lf bool) []byte {
	held := d.blanks.last()
	if d.state == goEscHex {
		out = append(out, '=', d.hex)
	}
	if lf && d.state != goEsc && d.state != goEscBlank {
		if held == '\r' {
			out = append(out, '\r')
		}
		out = append(out, '\n')
	}
	d.blanks.bytes = d.blanks.bytes[:0]
	d.state, d.lineLen = goText, 0
	return out
}

func (d *goQP) flushed(out []byte) []byte {
	end := *d // endLine only shortens its copy of the held blanks
	return end.endLine(out, false)
}

// pythonQP reads quoted-printable as CPython's binascii.a2b_qp does
// (Modules/binascii.c, binascii_a2b_qp_impl, header=False): what the email
// package's get_payload(decode=True) and quopri apply. No trimming of
// line ends. '=' then LF is a soft break (nothing); '=' then CR skips
// everything up to and including the next LF (however far: no cap); "=="
// is '='; '=' and two hex digits (either case) is the byte; any other '='
// is itself and the byte after it is read afresh; '=' at the end of the
// data is dropped.
type pythonQP struct {
	state pyQPState
	hex   byte
}

type pyQPState uint8

const (
	pyText   pyQPState = iota
	pyEsc              // after '='
	pyEscHex           // after '=' and a hex digit
	pySkip             // after '=' CR: up to the LF is dropped
)

func (d *pythonQP) decode(b, out []byte) []byte {
	for len(b) > 0 {
		switch d.state {
		case pyText:
			k := bytes.IndexByte(b, '=')
			if k < 0 {
				return append(out, b...)
			}
			out = append(out, b[:k]...)
			b, d.state = b[k+1:], pyEsc
			continue
		case pySkip:
			k := bytes.IndexByte(b, '\n')
			if k < 0 {
				return out
			}
			b, d.state = b[k+1:], pyText
			continue
		}
		c := b[0]
		b = b[1:]
		switch {
		case d.state == pyEscHex && isHex(c):
			out, d.state = append(out, unhex(d.hex)<<4|unhex(c)), pyText
		case d.state == pyEscHex && c == '=': // "=X" is itself; '=' begins afresh
			out, d.state = append(out, '=', d.hex), pyEsc
		case d.state == pyEscHex:
			out, d.state = append(out, '=', d.hex, c), pyText
		case c == '\n':
			d.state = pyText
		case c == '\r':
			d.state = pySkip
		case c == '=':
			out, d.state = append(out, '='), pyText
		case isHex(c):
			d.hex, d.state = c, pyEscHex
		default:
			out, d.state = append(out, '=', c), pyText
		}
	}
	return out
}

// flush is what the decoder gives at the end of the data for what it
// holds: "=X" is itself, a lone '=' is dropped.
func (d *pythonQP) flush(out []byte) []byte {
	if d.state == pyEscHex {
		out = append(out, '=', d.hex)
	}
	d.state = pyText
	return out
}

func (d *pythonQP) flushed(out []byte) []byte {
	end := *d
	return end.flush(out)
}

// uuView reads uuencoded lines as CPython's email package decodes a part
// labelled x-uuencode, uuencode, uue or x-uue (Lib/email/message.py,
// get_payload -> _decode_uu: bytes.splitlines, so a line ends at CR, LF
// or CRLF; lfOnly: the uu.decode of older releases, reading lines to LF,
// where a CR inside a line is a zero sextet), each line by
// binascii.a2b_uu (Modules/binascii.c, binascii_a2b_uu_impl): its first
// byte c gives the length (c-32)&63, each byte after it six bits
// (c-32)&63, the output cut to the length and made up with zero bits if
// the line is short. A line that a2b_uu refuses (a byte outside ' '..'`',
// or more after the data) is decoded from its first (length*4+5)/3 bytes
// the same way, or the part is given as it is (the raw view reads it).
// So only a line's first 1+84 bytes (63 bytes of output) can carry
// anything: the rest is skipped, whatever its length. Every line is
// decoded, "begin" and "end" too: Python's output is the lines between
// them joined, a run of this view's.
type uuView struct {
	lfOnly         bool
	inLine         bool // the length byte has been read
	left           int  // output bytes the line still gives
	bits, bitCount uint
}

func (d *uuView) decode(b, out []byte) []byte {
	for i := 0; i < len(b); i++ {
		if d.inLine && d.left == 0 {
			// The line gives nothing more: skip to its end.
			k := bytes.IndexAny(b[i:], d.lineEnds())
			if k < 0 {
				return out
			}
			i += k
		}
		c := b[i]
		if c == '\n' || (c == '\r' && !d.lfOnly) {
			out = d.endLine(out)
			continue
		}
		if !d.inLine {
			d.inLine, d.left = true, int((c-' ')&63)
			continue
		}
		sextet := uint((c - ' ') & 63)
		if c == '\r' {
			sextet = 0
		}
		out = d.sextet(sextet, out)
	}
	return out
}

func (d *uuView) flushed(out []byte) []byte {
	end := *d
	return end.endLine(out)
}

// lineEnds are the bytes that end a line.
func (d *uuView) lineEnds() string {
	if d.lfOnly {
		return "\n"
	}
	return "\r\n"
}

func (d *uuView) sextet(v uint, out []byte) []byte {
	d.bits = d.bits<<6 | v
	d.bitCount += 6
	if d.bitCount >= 8 {
		d.bitCount -= 8
		out = append(out, byte(d.bits>>d.bitCount))
		d.bits &= 1<<d.bitCount - 1
		d.left--
	}
	return out
}

// endLine makes up a short line with zero sextets. Once the bits left
// are out, the rest are zero bytes, and one stands for them all: a value
// holds no NUL (policy refuses control characters), so to every matcher a
// run of NULs is one mismatch, and the alphabet view drops them. Written
// out, a two-byte line (CR as its length) gave 45 bytes, and a body of
// empty lines cost the guard twenty times its plain reading (round 42).
func (d *uuView) endLine(out []byte) []byte {
	for d.left > 0 && d.bits != 0 {
		out = d.sextet(0, out)
	}
	if d.left > 0 {
		out = append(out, 0)
	}
	d.inLine, d.left, d.bits, d.bitCount = false, 0, 0, 0
	return out
}
