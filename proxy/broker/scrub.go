package broker

import (
	"bytes"
	"io"
)

// scrubReader replaces, in a response body as it streams, each pair's from
// by its to, across read boundaries: at each position the longest from
// that starts there (the first pair on a tie). What comes out is the same
// whatever reads the origin's bytes arrive in: exactly that replacement
// of the whole body.
//
// The chain rule: a from that begins inside the bytes a replacement took
// and ends past them is replaced too (its to follows the first's), and so
// on. Skipping it, as the scrubber once did, let the bytes of a value past
// the end of an earlier match out raw: a Basic token egressd built whose
// last characters the integration chose to be a key's first ones, shown
// back by the origin followed by the key, hid the key's head and gave its
// tail (round 24). No byte of any from found in the body is ever released,
// and the output depends on nothing but which whole froms the body holds
// and where: the same oracle a single value already gives, which the
// request side closes (guard.go).
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
// The work per byte is bounded by the number of pairs (bounded: see
// broker.pairs), not by the hold: one matcher per pair carries its state
// across reads and reports each occurrence once, as its last byte
// arrives; a position is decided once the hold behind it has arrived
// (every from starting there is known by then), and the held bytes are a
// window whose start moves, never copied per read. An earlier scrubber
// searched the held bytes again, and copied them, on every read: an
// origin writing a byte per TLS record made each byte cost a whole
// value's length of work per pair.
type scrubReader struct {
	src   io.ReadCloser
	pairs []pair
	finds []matcher // finds[i] looks for pairs[i].from
	hold  int       // bytes held back between reads: the longest from, less one

	// window[next:] is read from src, not yet released; src reads straight
	// into it, at most room bytes at a time, and it never grows past
	// hold+room: the held bytes are moved to its start when less than
	// half the room is left (a copy of at most hold bytes per room/2 read).
	// longest[k] is 1 + the index of the longest pair found starting at
	// window[k], or 0; it is made, as long as the window can be, at the
	// first match only: most answers hold none. last is the last position
	// with a pair noted (-1 if none), so a stretch with none is released
	// in one copy.
	//
	// What an answer in flight holds is therefore at most hold+room bytes
	// of window, 4 bytes per window byte of longest once a value was seen,
	// and out: round 33's client that asked for 8 answers a connection and
	// never read them found a 32 KiB read buffer beside a window that grew
	// to twice a read and a longest four times that, some 300 KiB an
	// answer in each layer.
	window  []byte
	longest []int32
	room    int
	next    int
	last    int
	covered int   // window[:covered] is replaced or released: the end of the last replacement
	ends    []int // scratch for matcher.feed

	out   []byte // out[sent:] is scanned, ready for the caller
	sent  int
	err   error  // src's error, once seen
	onEOF func() // runs once, when src reached a clean EOF (trailers are read by then)
}

// scrubRoom is what a scrubber reads from its source at a time, beside
// the bytes it holds back: half an HTTP/2 frame or TLS record, small
// because every answer in flight holds it (twice, with built tokens).
const scrubRoom = 8 << 10

func newScrubReader(src io.ReadCloser, pairs []pair, onEOF func()) *scrubReader {
	s := &scrubReader{src: src, onEOF: onEOF, room: scrubRoom, last: -1}
	for _, p := range pairs {
		if len(p.from) == 0 {
			continue // matches everywhere; scrubPairs makes none
		}
		s.pairs = append(s.pairs, p)
		s.finds = append(s.finds, matcher{pattern: p.from})
		s.hold = max(s.hold, len(p.from)-1)
	}
	s.room = max(s.room, s.hold) // a compaction's copy stays within twice the bytes read
	return s
}

func (s *scrubReader) Read(p []byte) (int, error) {
	for s.sent == len(s.out) && s.err == nil {
		s.out, s.sent = s.out[:0], 0
		s.makeRoom()
		at := len(s.window)
		n, err := s.src.Read(s.window[at:cap(s.window)])
		s.window = s.window[:at+n]
		s.take(at)
		if err != nil {
			s.err = err
		}
		s.release(err == io.EOF)
		if err == io.EOF && s.onEOF != nil {
			s.onEOF()
		}
	}
	if s.sent < len(s.out) {
		n := copy(p, s.out[s.sent:])
		s.sent += n
		return n, nil
	}
	return 0, s.err
}

// makeRoom makes the window, or moves its held bytes to its start when
// less than half the room is left after them.
func (s *scrubReader) makeRoom() {
	if s.window == nil {
		s.window = make([]byte, 0, s.hold+s.room)
		return
	}
	if cap(s.window)-len(s.window) >= max(1, s.room/2) || s.next == 0 {
		return
	}
	n := copy(s.window, s.window[s.next:])
	if s.longest != nil {
		copy(s.longest, s.longest[s.next:len(s.window)])
		clear(s.longest[n:len(s.window)])
	}
	s.window, s.last, s.covered, s.next = s.window[:n], s.last-s.next, max(0, s.covered-s.next), 0
}

// take notes, at the position each starts, every from that the bytes
// window[at:] (just read) complete, unless a replacement already passed
// it.
func (s *scrubReader) take(at int) {
	b := s.window[at:]
	for i := range s.finds {
		from := s.pairs[i].from
		s.ends = s.finds[i].feed(b, s.ends[:0])
		for _, end := range s.ends {
			start := at + end - len(from)
			if start < s.next {
				continue
			}
			if s.longest == nil {
				s.longest = make([]int32, cap(s.window))
			}
			if s.longest[start] == 0 || len(s.pairs[s.longest[start]-1].from) < len(from) {
				s.longest[start] = int32(i + 1)
				s.last = max(s.last, start)
			}
		}
	}
}

// release moves to out every position whose fate is known. Unless final,
// the last hold bytes stay, whatever they are: a from starting there may
// end in the next read, so no position there is decided (a shorter value
// complete there may lose to a longer one starting before it). On an
// error other than EOF nothing more is released (the held bytes may be a
// value's first ones).
//
// A position before covered was replaced already; if the longest from
// starting there runs past covered, it is replaced too (its to follows
// the last one) and covered moves to its end: the chain rule of the type's
// doc comment. Every position is visited once, so the work stays linear.
func (s *scrubReader) release(final bool) {
	limit := len(s.window) - s.hold
	if final {
		limit = len(s.window)
	}
	raw := max(s.next, s.covered) // window[raw:] is not yet in out, nor replaced
	for s.next < limit {
		if s.next > s.last {
			s.next = limit
			break
		}
		w := s.longest[s.next]
		if w == 0 {
			s.next++
			continue
		}
		p := s.pairs[w-1]
		end := s.next + len(p.from)
		switch {
		case s.next >= s.covered: // a match of its own
			s.out = append(s.out, s.window[raw:s.next]...)
			s.out = append(s.out, p.to...)
			s.covered, raw = end, end
		case end > s.covered: // begins inside a replacement, ends past it
			s.out = append(s.out, p.to...)
			s.covered, raw = end, end
		}
		s.next++
	}
	if raw < s.next {
		s.out = append(s.out, s.window[raw:s.next]...)
	}
}

// examined is the bytes the matchers examined: for tests.
func (s *scrubReader) examined() int {
	n := 0
	for _, m := range s.finds {
		n += m.examined
	}
	return n
}

func (s *scrubReader) Close() error { return s.src.Close() }

// scrubSet is what an answer is scrubbed of, in two layers. values are each
// secret's value and its stable base64 pieces (scrubPairs): they come
// first, and nothing of them is ever released. built are the Basic tokens
// egressd built for the host (BuiltTokens), each from already scrubbed of
// the values: the second layer reads the first's output, so it sees a
// token only where no value match crossed the token's edge (a value match
// that does takes precedence, and the token's other bytes pass as they
// are), and whatever it does or skips, its input holds no value to let
// out. It gives the integration back exactly the token it wrote, the
// characters that mix a value's edge bits with the integration's own
// included.
type scrubSet struct {
	values, built []pair
}

// all is every pair of both layers.
func (set scrubSet) all() []pair {
	return append(append([]pair(nil), set.values...), set.built...)
}

// newResponseScrubber scrubs src of set's values, then of its built tokens.
func newResponseScrubber(src io.ReadCloser, set scrubSet, onEOF func()) io.ReadCloser {
	if len(set.built) == 0 {
		return newScrubReader(src, set.values, onEOF)
	}
	return newScrubReader(newScrubReader(src, set.values, nil), set.built, onEOF)
}

// scrubBytes is b scrubbed of pairs, as a body holding only b would be.
func scrubBytes(b []byte, pairs []pair) []byte {
	s := newScrubReader(io.NopCloser(bytes.NewReader(b)), pairs, nil)
	s.room = max(s.room, len(b)+1) // one read takes it all
	out, _ := io.ReadAll(s)
	return out
}

// scrub is b scrubbed of both layers of set.
func (set scrubSet) scrub(b []byte) []byte {
	b = scrubBytes(b, set.values)
	if len(set.built) > 0 {
		b = scrubBytes(b, set.built)
	}
	return b
}
