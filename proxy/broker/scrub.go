package broker

import (
	"bytes"
	"io"
)

// scrubReader replaces, in a response body as it streams, each pair's from
// by its to, across read boundaries: it holds back only the end of what it
// read that may be the start of a match the next read completes (so a
// server-sent event is not kept waiting for the next one). Replaced output
// is never scanned again.
type scrubReader struct {
	src     io.ReadCloser
	pairs   []pair
	pending []byte // read from src, not yet scanned to the end
	out     []byte // scanned, ready for the caller
	err     error  // src's error, once seen
	onEOF   func() // runs once, when src reached a clean EOF (trailers are read by then)
	buf     []byte
}

func newScrubReader(src io.ReadCloser, pairs []pair, onEOF func()) *scrubReader {
	return &scrubReader{src: src, pairs: pairs, onEOF: onEOF, buf: make([]byte, 32<<10)}
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
// dropped, since they may be a value's first bytes.
func (s *scrubReader) scan(final bool) {
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
	keep := 0
	if !final {
		keep = s.partialMatch()
	}
	if len(s.pending) > keep {
		cut := len(s.pending) - keep
		s.out = append(s.out, s.pending[:cut]...)
		s.pending = append([]byte(nil), s.pending[cut:]...)
	}
}

// partialMatch is the length of the longest end of pending that a from
// starts with: a match the next read may complete starts there, or later.
func (s *scrubReader) partialMatch() int {
	keep := 0
	for _, p := range s.pairs {
		for k := min(len(s.pending), len(p.from)-1); k > keep; k-- {
			if bytes.HasSuffix(s.pending, p.from[:k]) {
				keep = k
				break
			}
		}
	}
	return keep
}

func (s *scrubReader) Close() error { return s.src.Close() }
