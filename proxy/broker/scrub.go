package broker

import (
	"bytes"
	"io"
)

// minPartial is the shortest piece of a value scrubbed at a body's ends:
// a body that begins with a value's last bytes, or ends with its first
// ones, is the shape of an echo cut short (a byte range, an offset or
// length the integration chose). Shorter pieces are left: eight bytes of
// a key's edge appear by chance in ordinary text too often to rewrite.
const minPartial = 8

// scrubReader replaces, in a response body as it streams, each pair's from
// by its to, across read boundaries: it holds back only the end of what it
// read that may be the start of a match the next read completes (so a
// server-sent event is not kept waiting for the next one). Replaced output
// is never scanned again. At the body's start, a head that is a value's
// last minPartial bytes or more is replaced by the same end of its to; at
// the end, a tail that is a value's first bytes, by the start of its to.
//
// The work is linear in the body: whole values are found with bytes.Index,
// and the part held back is a KMP automaton's state over at most the
// longest from's length, per read (never a comparison per candidate
// length, which an integration choosing a long Basic token made
// quadratic).
type scrubReader struct {
	src      io.ReadCloser
	pairs    []pair
	kmp      []matcher // one per pair
	pending  []byte    // read from src, not yet scanned to the end
	out      []byte    // scanned, ready for the caller
	err      error     // src's error, once seen
	onEOF    func()    // runs once, when src reached a clean EOF (trailers are read by then)
	buf      []byte
	headDone bool // the body's start was judged
	steps    int  // automaton steps taken, for the tests' bound on the work
}

func newScrubReader(src io.ReadCloser, pairs []pair, onEOF func()) *scrubReader {
	s := &scrubReader{src: src, pairs: pairs, onEOF: onEOF, buf: make([]byte, 32<<10)}
	for _, p := range pairs {
		s.kmp = append(s.kmp, newMatcher(p.from))
	}
	return s
}

func (s *scrubReader) Read(p []byte) (int, error) {
	for len(s.out) == 0 && s.err == nil {
		n, err := s.src.Read(s.buf)
		s.pending = append(s.pending, s.buf[:n]...)
		if err != nil {
			s.err = err
		}
		s.scan(err == io.EOF)
		if err == io.EOF && s.onEOF != nil {
			s.onEOF()
		}
	}
	if len(s.out) > 0 {
		n := copy(p, s.out)
		s.out = s.out[n:]
		return n, nil
	}
	return 0, s.err
}

// scan moves pending to out, replacing every match that lies whole in
// pending. Unless final, it keeps back the longest end of pending that is
// the start of some from; on an error other than EOF the held bytes are
// dropped, since they may be a value's first bytes. When final, that end
// is replaced by the start of its to, if it is minPartial bytes or more.
func (s *scrubReader) scan(final bool) {
	if !s.headDone {
		if !final && s.headMayGrow() {
			return // everything read so far may be a value's last bytes
		}
		s.headDone = true
		s.scrubHead()
	}
	for {
		at, which := -1, -1
		for i, p := range s.pairs {
			j := bytes.Index(s.pending, p.from)
			if j >= 0 && (at < 0 || j < at || (j == at && len(p.from) > len(s.pairs[which].from))) {
				at, which = j, i
			}
		}
		if at < 0 {
			break
		}
		s.out = append(s.out, s.pending[:at]...)
		s.out = append(s.out, s.pairs[which].to...)
		s.pending = s.pending[at+len(s.pairs[which].from):]
	}
	keep, which := s.partialMatch()
	if final {
		if keep >= minPartial {
			cut := len(s.pending) - keep
			s.out = append(s.out, s.pending[:cut]...)
			s.out = append(s.out, prefixOf(s.pairs[which].to, keep)...)
			s.pending = nil
			return
		}
		keep = 0
	}
	if len(s.pending) > keep {
		cut := len(s.pending) - keep
		s.out = append(s.out, s.pending[:cut]...)
		s.pending = append([]byte(nil), s.pending[cut:]...)
	}
}

// headMayGrow reports whether more bytes could make the body's start a
// longer end of some from: all of pending lies inside a from, past its
// first byte and before its last. Otherwise the head is judged now, on
// what pending holds.
func (s *scrubReader) headMayGrow() bool {
	for _, p := range s.pairs {
		if len(p.from) > minPartial && len(s.pending) < len(p.from)-1 && bytes.Contains(p.from[1:len(p.from)-1], s.pending) {
			return true
		}
	}
	return false
}

// scrubHead replaces the body's first bytes, when they are the last
// minPartial or more bytes of a from (but not all of it), by the same
// number of its to's last bytes (all of to when it is shorter).
func (s *scrubReader) scrubHead() {
	best, which := 0, -1
	for i, p := range s.pairs {
		if len(p.from) <= minPartial {
			continue
		}
		head := s.pending[:min(len(s.pending), len(p.from)-1)]
		// The longest start of head that is an end of from[1:] (so
		// shorter than from): head's automaton run over from[1:].
		k := newMatcher(head).suffixPrefix(p.from[1:], &s.steps)
		if k >= minPartial && k > best {
			best, which = k, i
		}
	}
	if which < 0 {
		return
	}
	s.out = append(s.out, suffixOf(s.pairs[which].to, best)...)
	s.pending = s.pending[best:]
}

// partialMatch is the length of the longest end of pending that a from
// starts with (shorter than the from), and which pair's: a match the next
// read may complete starts there, or later.
func (s *scrubReader) partialMatch() (keep, which int) {
	which = -1
	for i, m := range s.kmp {
		if k := m.suffixPrefix(s.pending, &s.steps); k > keep {
			keep, which = k, i
		}
	}
	return keep, which
}

func (s *scrubReader) Close() error { return s.src.Close() }

func prefixOf(b []byte, n int) []byte { return b[:min(n, len(b))] }
func suffixOf(b []byte, n int) []byte { return b[len(b)-min(n, len(b)):] }

// matcher is a pattern with its KMP failure function: fail[i] is the
// length of the longest proper border of pat[:i+1].
type matcher struct {
	pat  []byte
	fail []int
}

func newMatcher(pat []byte) matcher {
	fail := make([]int, len(pat))
	for i, k := 1, 0; i < len(pat); i++ {
		for k > 0 && pat[i] != pat[k] {
			k = fail[k-1]
		}
		if pat[i] == pat[k] {
			k++
		}
		fail[i] = k
	}
	return matcher{pat: pat, fail: fail}
}

// suffixPrefix is the length of the longest end of text that is a start
// of pat (all of pat at most). Only text's last len(pat) bytes can hold
// it, so the work is O(len(pat)) whatever text's length; steps counts it.
func (m matcher) suffixPrefix(text []byte, steps *int) int {
	if over := len(text) - len(m.pat); over > 0 {
		text = text[over:]
	}
	q := 0
	for _, c := range text {
		*steps++
		for q > 0 && (q == len(m.pat) || m.pat[q] != c) {
			*steps++
			q = m.fail[q-1]
		}
		if q < len(m.pat) && m.pat[q] == c {
			q++
		}
	}
	return q
}
