package broker

import (
	"bytes"
	"io"
)

// scrubReader replaces, in a response body as it streams, each pair's from
// by its to, across read boundaries. Replaced output is never scanned
// again.
//
// Nothing it does depends on what the body holds beyond whole values: it
// always holds back the last (longest from − 1) bytes until more arrive or
// the body ends, and it never rewrites a piece of a value. A scrubber that
// held back only bytes that could start a value, or rewrote a body's edges
// when they looked like a value's ends, answered the integration's
// question "is this guess the start of the key?" (by the delay, or by the
// rewrite) through an origin that echoes what it is sent: the whole key
// came back one character at a time in about a thousand requests. An
// echo of a piece of a value therefore passes as it is: a residual risk
// the README names, and why ranges are never asked for.
//
// The work is linear in the body, times the number of pairs (bounded:
// see broker.pairs): whole values are found with bytes.Index over what one
// read added plus the bytes held back, each pair searched again only past
// a replacement that overtook its next match.
type scrubReader struct {
	src     io.ReadCloser
	pairs   []pair
	hold    int    // bytes held back between reads: the longest from, less one
	pending []byte // read from src, not yet released
	out     []byte // scanned, ready for the caller
	err     error  // src's error, once seen
	onEOF   func() // runs once, when src reached a clean EOF (trailers are read by then)
	buf     []byte
}

func newScrubReader(src io.ReadCloser, pairs []pair, onEOF func()) *scrubReader {
	s := &scrubReader{src: src, pairs: pairs, onEOF: onEOF, buf: make([]byte, 32<<10)}
	for _, p := range pairs {
		s.hold = max(s.hold, len(p.from)-1)
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
// pending, and, unless final, keeps back the last hold bytes, whatever
// they are: a match the next read completes starts there or later. On an
// error other than EOF nothing more is released (the held bytes may be a
// value's first ones).
func (s *scrubReader) scan(final bool) {
	// next[i] is where pairs[i] next matches in what is left, or -1: each
	// pair is searched again only once a replacement passed its match, so
	// a body full of values costs len(pairs) searches, not one per match.
	next := make([]int, len(s.pairs))
	for i, p := range s.pairs {
		next[i] = bytes.Index(s.pending, p.from)
	}
	done := 0 // pending[:done] is in out
	for {
		at, which := -1, -1
		for i, j := range next {
			if j >= 0 && (at < 0 || j < at || (j == at && len(s.pairs[i].from) > len(s.pairs[which].from))) {
				at, which = j, i
			}
		}
		if at < 0 {
			break
		}
		s.out = append(s.out, s.pending[done:at]...)
		s.out = append(s.out, s.pairs[which].to...)
		done = at + len(s.pairs[which].from)
		for i, j := range next {
			if j >= 0 && j < done {
				if k := bytes.Index(s.pending[done:], s.pairs[i].from); k >= 0 {
					next[i] = done + k
				} else {
					next[i] = -1
				}
			}
		}
	}
	rest := s.pending[done:]
	keep := min(s.hold, len(rest))
	if final {
		keep = 0
	}
	cut := len(rest) - keep
	s.out = append(s.out, rest[:cut]...)
	s.pending = append([]byte(nil), rest[cut:]...)
}

func (s *scrubReader) Close() error { return s.src.Close() }
