package broker

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"testing/iotest"

	"github.com/egressd/egressd/policy"
)

// replaceLeftmostLongest is the scrubber's meaning on a whole body, written
// the slow, obvious way: at each position the longest pair that starts
// there (the first such pair on a tie) is replaced; a pair that starts
// inside the bytes replaced so far and ends past them is replaced too (the
// chain rule), and one wholly inside them is dropped. It checks, too, that
// no byte of any occurrence of any from is left as it is.
func replaceLeftmostLongest(body []byte, pairs []pair) []byte {
	var out []byte
	covered, raw := 0, 0
	for i := 0; i < len(body); i++ {
		best := -1
		for k, p := range pairs {
			if len(p.from) > 0 && bytes.HasPrefix(body[i:], p.from) && (best < 0 || len(p.from) > len(pairs[best].from)) {
				best = k
			}
		}
		if best < 0 {
			continue
		}
		end := i + len(pairs[best].from)
		if i >= covered {
			out = append(out, body[raw:i]...)
		} else if end <= covered {
			continue
		}
		out = append(out, pairs[best].to...)
		covered, raw = end, end
	}
	if raw < len(body) {
		out = append(out, body[raw:]...)
	}
	return out
}

// splitReader hands out r's bytes in reads of the sizes sizes names in
// turn (each 1 to 16 bytes; past its end, one byte at a time).
type splitReader struct {
	r     io.Reader
	sizes []byte
}

func (s *splitReader) Read(p []byte) (int, error) {
	n := 1
	if len(s.sizes) > 0 {
		n = 1 + int(s.sizes[0]%16)
		s.sizes = s.sizes[1:]
	}
	return s.r.Read(p[:min(n, len(p))])
}

// scrubSplit streams body through a scrubber in reads split as sizes says.
func scrubSplit(t testing.TB, body []byte, pairs []pair, sizes []byte) []byte {
	t.Helper()
	got, err := io.ReadAll(newScrubReader(io.NopCloser(&splitReader{r: bytes.NewReader(body), sizes: sizes}), pairs, nil))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// overlappingPairs are values that are prefixes, suffixes and inner
// pieces of one another, the case a streaming matcher gets wrong.
func overlappingPairs() []pair {
	var pairs []pair
	for i, from := range []string{"aab", "ab", "abab", "b", "ba", "abaab", "aaaa", "bab"} {
		pairs = append(pairs, pair{from: []byte(from), to: []byte(fmt.Sprintf("<%d>", i))})
	}
	return pairs
}

// TestScrubbingOverlappingValuesInAnySplitIsALeftmostLongestReplaceOfTheWholeBody:
// values that are prefixes or inner pieces of longer ones, in bodies made
// of nothing but their letters, read in random splits: the stream must be
// scrubbed exactly as the whole body would be. A scrubber that replaced a
// short value as soon as it lay whole in its held-back bytes answered
// differently for one-byte reads than for one read (a longer value
// starting earlier lost to it), so what came back depended on how the
// origin cut its writes.
func TestScrubbingOverlappingValuesInAnySplitIsALeftmostLongestReplaceOfTheWholeBody(t *testing.T) {
	pairs := overlappingPairs()
	rng := rand.New(rand.NewPCG(15, 16))
	for round := range 2000 {
		body := make([]byte, rng.IntN(64))
		for i := range body {
			body[i] = "ab"[rng.IntN(2)]
		}
		sizes := make([]byte, len(body))
		for i := range sizes {
			sizes[i] = byte(rng.IntN(256))
		}
		if got, want := scrubSplit(t, body, pairs, sizes), replaceLeftmostLongest(body, pairs); !bytes.Equal(got, want) {
			t.Fatalf("round %d: body %q split %v\ngot  %q\nwant %q", round, body, sizes, got, want)
		}
	}
}

// TestAnEchoedBasicTokenComesBackAsTheIntegrationWroteItWhateverTheReads:
// a Basic token egressd built holds the value's base64 piece, a shorter
// pair, inside it. Streamed a byte at a time the piece lay whole in the
// held-back bytes before the token did, was replaced first, and the
// integration got back a token that was neither its own nor the one sent;
// the answer must not depend on the origin's write sizes.
func TestAnEchoedBasicTokenComesBackAsTheIntegrationWroteItWhateverTheReads(t *testing.T) {
	// A value whose first and last bits differ from the placeholder's, so
	// the base64 piece's edges do not happen to read the same.
	a := secret(t, "A", "a.example", phA, "0-real-value-0123456789?")
	h := http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+phA))}}
	_, echoes := substituteHeaders(h, []policy.Secret{a})
	pairs := scrubPairs([]policy.Secret{a}, echoes)
	token := h.Get("Authorization")[len("Basic "):]
	body := []byte(`{"echo":"` + token + `"}`)
	want := []byte(`{"echo":"` + base64.StdEncoding.EncodeToString([]byte("user:"+phA)) + `"}`)
	for _, split := range []string{"whole", "one byte"} {
		var src io.Reader = bytes.NewReader(body)
		if split == "one byte" {
			src = iotest.OneByteReader(src)
		}
		got, err := io.ReadAll(newResponseScrubber(io.NopCloser(src), pairs, nil))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: got %s (%v), want %s", split, got, err, want)
		}
	}
}

// FuzzScrubOverlappingValues: any values (up to eight, split from pats at
// '|'), any body, any read split: the stream equals the reference.
func FuzzScrubOverlappingValues(f *testing.F) {
	f.Add([]byte("aab|ab|abab"), []byte("aababababaab"), []byte{0, 3, 1})
	f.Add([]byte("abc|b|abcd|bcd"), []byte("xabcabcdbcdab"), []byte{5, 0, 0, 9})
	f.Fuzz(func(t *testing.T, pats, body, sizes []byte) {
		var pairs []pair
		for i, from := range bytes.Split(pats, []byte("|")) {
			if len(from) > 0 && len(pairs) < 8 {
				pairs = append(pairs, pair{from: from, to: []byte(fmt.Sprintf("<%d>", i))})
			}
		}
		if got, want := scrubSplit(t, body, pairs, sizes), replaceLeftmostLongest(body, pairs); !bytes.Equal(got, want) {
			t.Fatalf("got  %q\nwant %q", got, want)
		}

	})
}

// longAndShortPairs are the pairs a response may carry at worst for a
// scrubber's hold: one value of policy.MaxSecretValue bytes of 'A' but
// its last (a KMP automaton's worst case in a body of 'A's, and what
// bytes.Index must search all of), and a 64-byte one.
func longAndShortPairs(longest int) []pair {
	long := append(bytes.Repeat([]byte("A"), longest-1), 'B')
	short := append(bytes.Repeat([]byte("A"), 63), 'C')
	return []pair{{from: long, to: []byte(phA)}, {from: short, to: []byte(phB)}}
}

// TestScrubbingAByteAtATimeExaminesEachByteAFewTimesWhateverTheValueLength:
// an origin streaming one byte per TLS record made the scrubber search all
// its held-back bytes (a whole value's length) again for every pair, and
// copy them, on every byte: CPU the integration multiplied by the length
// of its value. Each byte must now be examined a bounded number of times
// per pair, whatever the hold. Counted, not timed.
func TestScrubbingAByteAtATimeExaminesEachByteAFewTimesWhateverTheValueLength(t *testing.T) {
	body := bytes.Repeat([]byte("A"), 256<<10)
	pairs := longAndShortPairs(policy.MaxSecretValue)
	s := newScrubReader(io.NopCloser(iotest.OneByteReader(bytes.NewReader(body))), pairs, nil)
	got, err := io.ReadAll(s)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("a body with no value in it came back changed (%d bytes, %v)", len(got), err)
	}
	if limit := 4 * len(body) * len(pairs); s.examined() > limit {
		t.Fatalf("examined %d bytes for a %d-byte body read a byte at a time (%d per byte), want at most %d",
			s.examined(), len(body), s.examined()/len(body), limit)
	}
}

// BenchmarkScrubOneByteReads reads a 256 KiB body a byte per Read through
// a scrubber whose longest value is 8 KiB, then 64 bytes: the ns per byte
// must not follow the hold.
func BenchmarkScrubOneByteReads(b *testing.B) {
	body := make([]byte, 256<<10)
	for i := range body {
		body[i] = "AAAAAAAB"[i*7919>>3%8]
	}
	for _, longest := range []int{policy.MaxSecretValue, 64} {
		b.Run(fmt.Sprintf("longest=%d", longest), func(b *testing.B) {
			pairs := longAndShortPairs(longest)
			b.SetBytes(int64(len(body)))
			for range b.N {
				s := newScrubReader(io.NopCloser(iotest.OneByteReader(bytes.NewReader(body))), pairs, nil)
				if _, err := io.Copy(io.Discard, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAValueBeginningInsideAnEarlierValueComesBackAsItsPlaceholderNotItsTail:
// two values where the second begins inside the first: the scrubber
// replaced the first and skipped past it, and the second's bytes after the
// first's end came back raw. Both are replaced now, in any split.
func TestAValueBeginningInsideAnEarlierValueComesBackAsItsPlaceholderNotItsTail(t *testing.T) {
	pairs := []pair{{from: []byte("first-value-XYZ"), to: []byte("<A>")}, {from: []byte("XYZ-second-value"), to: []byte("<B>")}}
	body := []byte("[first-value-XYZ-second-value]")
	for _, sizes := range [][]byte{nil, {15}, {3, 7, 15, 1}} {
		if got := scrubSplit(t, body, pairs, append(sizes, 255)); string(got) != "[<A><B>]" {
			t.Fatalf("split %v: got %q, want [<A><B>]", sizes, got)
		}
	}
}

// TestABuiltTokenWhoseTailIsAValuesHeadDoesNotHideTheValuesTail: a Basic
// token egressd built ends in bytes the integration chose, the first ones
// of another secret's value; the origin shows the token followed by the
// rest of that value. The token's match took the value's head and the
// value's own match was skipped: its tail came back raw (round 24). The
// value's match comes first now.
func TestABuiltTokenWhoseTailIsAValuesHeadDoesNotHideTheValuesTail(t *testing.T) {
	const key = "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
	weak := secret(t, "W", "a.example", phA, "Summer2019!")
	strong := secret(t, "K", "a.example", phB, key)
	tail, _ := base64.StdEncoding.DecodeString("AIza")
	h := http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("abc:"+phA+string(tail)))}}
	_, echoes := substituteHeaders(h, []policy.Secret{weak})
	set := scrubPairs([]policy.Secret{weak, strong}, echoes)
	token := h.Get("Authorization")[len("Basic "):]
	body := []byte(token + key[4:])
	for _, split := range []string{"whole", "one byte"} {
		var src io.Reader = bytes.NewReader(body)
		if split == "one byte" {
			src = iotest.OneByteReader(src)
		}
		got, err := io.ReadAll(newResponseScrubber(io.NopCloser(src), set, nil))
		if err != nil || !bytes.HasSuffix(got, []byte(phB)) || bytes.Contains(got, []byte(key[4:12])) {
			t.Fatalf("%s: got %q (%v), want the key's placeholder and none of its bytes", split, got, err)
		}
	}
}

// TestScrubbingThroughAWindowOfAnyRoomIsALeftmostLongestReplaceOfTheWholeBody:
// the scrubber reads into a window that never grows (hold + room bytes:
// an answer in flight held some 300 KiB of growing buffers before round
// 33) and moves its held bytes, and the matches noted at them, to its
// start as it fills. A value that straddles such a move, or a chain of
// replacements that does, must come out as the whole body's replace,
// whatever the room and the reads; and the window and its match index
// stay within hold + room.
func TestScrubbingThroughAWindowOfAnyRoomIsALeftmostLongestReplaceOfTheWholeBody(t *testing.T) {
	pairs := overlappingPairs()
	rng := rand.New(rand.NewPCG(33, 15))
	for round := range 3000 {
		body := make([]byte, rng.IntN(200))
		for i := range body {
			body[i] = "abx"[rng.IntN(3)]
		}
		sizes := make([]byte, 64)
		for i := range sizes {
			sizes[i] = byte(rng.IntN(256))
		}
		room := 1 + rng.IntN(12)
		s := newScrubReader(io.NopCloser(&splitReader{r: bytes.NewReader(body), sizes: sizes}), pairs, nil)
		s.room = room
		got, err := io.ReadAll(s)
		if err != nil {
			t.Fatal(err)
		}
		if want := replaceLeftmostLongest(body, pairs); !bytes.Equal(got, want) {
			t.Fatalf("round %d, room %d, body %q: got %q, want %q", round, room, body, got, want)
		}
		if limit := s.hold + room; cap(s.window) > limit || len(s.longest) > limit {
			t.Fatalf("round %d: the window grew to %d bytes and its index to %d entries, over hold + room = %d", round, cap(s.window), len(s.longest), limit)
		}
	}
}
