// Package linejoin shares one output stream between a program's relayed
// output and egressd's own one-line messages. egressd run relays the
// program's stderr to the stderr it writes its own lines to (warnings,
// audit checkpoints); a program that ends its output without a line break
// would otherwise have egressd's next line glued to its last one, so that
// a reader (journalctl, audit verify --checkpoints) sees the program's text
// in front of egressd's line, or sees a line egressd seems to have
// written begin with the program's bytes.
//
// Nothing authenticates a checkpoint line, so the relayed side never
// carries one either: see Joint.Relayed.
package linejoin

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// marker is what audit.ReadCheckpoints takes as naming a checkpoint when
// a quote follows it, directly (`checkpoint"`, JSON) or after a backslash
// (`checkpoint\"`, JSON quoted in JSON as journalctl -o json prints it).
const marker = "checkpoint"

// quoteEscape replaces a quote that would complete a marker in the
// program's bytes. It is visible (the reader still sees a quote was
// there), it holds no quote itself, and it is not a JSON escape, so no
// log pipeline that decodes the program's JSON lines turns it back into
// the quote it stands for (\u0022 would be undone by every such decoder).
const quoteEscape = `\x22`

// tailSize is how many of the stream's last bytes decide whether a quote
// completes a marker: the marker and a backslash.
const tailSize = len(marker) + 1

// Joint serialises the writes of both sides and knows whether the stream
// is in the middle of a line the program began.
type Joint struct {
	mu      sync.Mutex
	midLine bool // the last byte written was the program's, and not a line break
	// lead follows the program's current line's first word (nextLead):
	// egressd's own lines end in a line break, so the zero value, a line's
	// start, is right after them too.
	lead int
	// firstRune counts the bytes of a line's non-ASCII first rune still to
	// be shown escaped.
	firstRune int
	// tail holds the stream's last bytes, as written (both sides): a
	// marker split over two writes of the program is caught by it.
	tail []byte
}

// Relayed returns a writer for the program's output to w: bytes pass as
// they are, in the order written and at once, except that a quote which
// would make the stream name a checkpoint (after "checkpoint" or
// "checkpoint\") is written as \x22. egressd's checkpoint lines share this
// stream, and a program's line shaped like one would be read by audit
// verify --checkpoints as egressd's: one naming a seq past the log's end
// is a false rollback alarm, and one matching a rewritten unkeyed log
// makes it agree. The decision falls on the marker's last byte, so nothing
// is held back: no byte waits for a later write, none is lost at EOF, and
// none is reordered against egressd's own lines.
func (j *Joint) Relayed(w io.Writer) io.Writer { return relayed{j, w} }

// Own returns a writer for egressd's own messages to w, each Write one or
// more whole lines: when the program left a line unterminated, a line
// break ends it first, so the message starts a line of its own.
func (j *Joint) Own(w io.Writer) io.Writer { return own{j, w} }

// remember keeps the last tailSize bytes of the stream after p was written.
func (j *Joint) remember(p []byte) {
	if len(p) >= tailSize {
		j.tail = append(j.tail[:0], p[len(p)-tailSize:]...)
		return
	}
	j.tail = append(j.tail, p...)
	if extra := len(j.tail) - tailSize; extra > 0 {
		j.tail = append(j.tail[:0], j.tail[extra:]...)
	}
}

// completesMarker says whether a quote written after the stream's tail and
// before (the program's bytes p up to the quote) would name a checkpoint.
func (j *Joint) completesMarker(before []byte) bool {
	var last [tailSize]byte
	n := copy(last[:], lastBytes(j.tail, before, tailSize))
	s := last[:n]
	return bytes.HasSuffix(s, []byte(marker)) || bytes.HasSuffix(s, []byte(marker+`\`))
}

// lastBytes is the last n bytes of a followed by b.
func lastBytes(a, b []byte, n int) []byte {
	if len(b) >= n {
		return b[len(b)-n:]
	}
	keep := n - len(b)
	if keep > len(a) {
		keep = len(a)
	}
	return append(append(make([]byte, 0, n), a[len(a)-keep:]...), b...)
}

type relayed struct {
	j *Joint
	w io.Writer
}

// Write writes p, escaping each quote that completes a marker and each d
// that completes "egressd" as a line's first word. It returns how many of
// p's bytes were written, as io.Writer requires.
func (r relayed) Write(p []byte) (int, error) {
	r.j.mu.Lock()
	defer r.j.mu.Unlock()
	done := 0 // p[:done] is written
	for q := 0; q < len(p); q++ {
		escape := ""
		switch {
		case p[q] == '"' && r.j.completesMarker(p[done:q]):
			escape = quoteEscape
		case p[q] == 'd' && r.j.lead == len(ownWord):
			escape = ownWordEscape
		case p[q] >= 0x80 && (r.j.lead >= 0 || r.j.firstRune > 0):
			// A non-ASCII rune in a line's first word while it can still
			// read as egressd's may be a look-alike ("\u0435gressd",
			// "egres\u0455d", Cyrillic): it is shown escaped (rounds 20, 22).
			escape = fmt.Sprintf(`\x%02x`, p[q])
			if r.j.firstRune > 0 {
				r.j.firstRune--
			} else {
				r.j.firstRune = continuationBytes(p[q])
			}
		}
		r.j.lead = nextLead(r.j.lead, p[q])
		if escape == "" {
			continue
		}
		n, err := r.write(p[done:q])
		done += n
		if err != nil {
			return done, err
		}
		if _, err := r.write([]byte(escape)); err != nil {
			return done, err
		}
		done++ // the byte, written as its escape
	}
	n, err := r.write(p[done:])
	return done + n, err
}

// ownWord is how egressd's own lines on the shared stream begin ("egressd:
// warning: …", "egressd run: …"), less its last letter; ownWordEscape is
// that letter as the program's line shows it. A program's line shaped like
// egressd's warning, with an approve command in it, would otherwise be
// read as egressd's (round 19: the operator pasted the program's command
// and approved a host it did not name).
const (
	ownWord       = "egress"
	ownWordEscape = `\x64`
)

// continuationBytes is how many bytes follow b, the first byte of a UTF-8
// sequence (none for a byte that begins none).
func continuationBytes(b byte) int {
	switch {
	case b&0xe0 == 0xc0:
		return 1
	case b&0xf0 == 0xe0:
		return 2
	case b&0xf8 == 0xf0:
		return 3
	}
	return 0
}

// nextLead follows a line's beginning: 0 at a line's start and while only
// blanks came; k once its first word's first k letters are ownWord's; -1
// once it can no longer begin with it.
func nextLead(lead int, b byte) int {
	switch {
	case b == '\n':
		return 0
	case lead == 0 && (b == ' ' || b == '\t'):
		return 0
	case lead >= 0 && lead < len(ownWord) && b == ownWord[lead]:
		return lead + 1
	}
	return -1
}

// write writes b as it is and keeps the stream's state.
func (r relayed) write(b []byte) (int, error) {
	n, err := r.w.Write(b)
	if n > 0 {
		r.j.midLine = b[n-1] != '\n'
		r.j.remember(b[:n])
	}
	return n, err
}

type own struct {
	j *Joint
	w io.Writer
}

func (o own) Write(p []byte) (int, error) {
	o.j.mu.Lock()
	defer o.j.mu.Unlock()
	if o.j.midLine && len(p) > 0 {
		if _, err := o.w.Write([]byte{'\n'}); err != nil {
			return 0, err
		}
		o.j.midLine = false
		o.j.remember([]byte{'\n'})
	}
	n, err := o.w.Write(p)
	o.j.remember(p[:n])
	o.j.lead = 0
	return n, err
}
