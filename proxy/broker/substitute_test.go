package broker

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/policy"
)

const (
	phA  = "egressd-ph-AAAAAAAAAAAAAAAAAAAAAAAA"
	valA = "real-A-value-0123456789"
	phB  = "egressd-ph-BBBBBBBBBBBBBBBBBBBBBBBB"
	valB = "real-B-value-much-longer-than-its-placeholder-xyz"
)

func secret(t testing.TB, name, host, ph, val string) policy.Secret {
	e, _, err := allowlist.ParseEntry(host)
	if err != nil {
		t.Fatal(err)
	}
	return policy.Secret{Name: name, Hosts: []allowlist.Entry{e}, Placeholder: ph, Value: []byte(val)}
}

func TestSubstitutionReplacesEveryPlaceholderInEveryValueAndInBasic(t *testing.T) {
	a := secret(t, "A", "a.example", phA, valA)
	h := http.Header{
		"Authorization": {"Bearer " + phA},
		"X-Key":         {phA + phA, "k=" + phA + ";" + phA},
		"X-Basic":       {"basic  " + base64.StdEncoding.EncodeToString([]byte(phA+":"+phA))},
		"X-Bad-Basic":   {"Basic !!" + phA},
	}
	used, echoes := substituteHeaders(h, []policy.Secret{a})
	if len(used) != 1 || used[0] != "A" {
		t.Fatalf("used %v", used)
	}
	if h.Get("Authorization") != "Bearer "+valA || h["X-Key"][0] != valA+valA || h["X-Key"][1] != "k="+valA+";"+valA {
		t.Fatalf("header values not substituted: %v", h)
	}
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(h.Get("X-Basic"), "basic  "))
	if string(raw) != valA+":"+valA {
		t.Fatalf("Basic decodes to %q", raw)
	}
	if h.Get("X-Bad-Basic") != "Basic !!"+valA {
		t.Fatalf("malformed Basic: raw placeholder should still be replaced, got %q", h.Get("X-Bad-Basic"))
	}
	if len(echoes) != 1 || bytes.Contains(echoes[0].to, []byte(valA)) {
		t.Fatalf("echo pairs %q", echoes)
	}
}

func TestPlaceholderOfAnotherHostIsMisdirectedAnywhere(t *testing.T) {
	b := secret(t, "B", "b.example", phB, valB)
	for name, h := range map[string]http.Header{
		"value":       {"X": {"x" + phB}},
		"name":        {phB: {"x"}},
		"canonical":   {http.CanonicalHeaderKey(phB): {"x"}}, // as net/http stores a header name
		"basic":       {"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+phB))}},
		"second item": {"X": {"fine", phB}},
	} {
		if !misdirected("/", h, []policy.Secret{b}) {
			t.Errorf("%s: another host's placeholder not caught", name)
		}
	}
	if !misdirected("/p?k="+phB, http.Header{}, []policy.Secret{b}) {
		t.Error("placeholder in the request target not caught")
	}
	if misdirected("/", http.Header{"X": {phA}}, []policy.Secret{b}) {
		t.Error("a clean request refused")
	}
}

func TestScrubbingReplacesValuesSplitAcrossEveryReadBoundary(t *testing.T) {
	pairs := []pair{{from: []byte(valA), to: []byte(phA)}, {from: []byte(valB), to: []byte(phB)}}
	body := "x" + valA + valA + "y" + valB + "z" + valA[:5] + "end" + valB
	want := "x" + phA + phA + "y" + phB + "z" + valA[:5] + "end" + phB
	got, err := io.ReadAll(iotest.OneByteReader(newScrubReader(io.NopCloser(iotest.OneByteReader(strings.NewReader(body))), pairs, nil)))
	if err != nil || string(got) != want {
		t.Fatalf("got %q (%v)\nwant %q", got, err, want)
	}
}

func TestScrubbingDropsTheHeldTailOnAnError(t *testing.T) {
	pairs := []pair{{from: []byte(valA), to: []byte(phA)}}
	src := io.MultiReader(strings.NewReader("ok"+valA[:len(valA)-1]), iotest.ErrReader(io.ErrUnexpectedEOF))
	got, err := io.ReadAll(newScrubReader(io.NopCloser(src), pairs, nil))
	if err == nil || bytes.Contains(got, []byte(valA[:len(valA)-1])) {
		t.Fatalf("after an error the reader gave %q (%v): a value's start must not be released", got, err)
	}
}

// TestScrubbingDoesNotHoldBackAStreamedEventsTail: a server-sent event
// must reach the client when it ends, not when the next one arrives; only
// bytes that may start a value are held back.
func TestScrubbingDoesNotHoldBackAStreamedEventsTail(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	s := newScrubReader(pr, []pair{{from: []byte(valA), to: []byte(phA)}}, nil)
	event := "data: {\"delta\":\"hello\"}\n\n"
	go io.WriteString(pw, event)
	var got []byte
	buf := make([]byte, 256)
	for len(got) < len(event) {
		n, err := s.Read(buf) // blocks forever if the tail is held for more input
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != event {
		t.Fatalf("got %q", got)
	}
	go io.WriteString(pw, "x"+valA[:4])
	n, _ := s.Read(buf)
	if string(buf[:n]) != "x" {
		t.Fatalf("a possible value start was released: %q", buf[:n])
	}
}

// TestScrubbingReplacesAValuesEdgesCutAtTheBodysEnds: an echo cut short
// (a byte range, an offset the integration chose) begins with a value's
// last bytes or ends with its first ones; eight bytes or more of either
// are scrubbed, in reads of every size.
func TestScrubbingReplacesAValuesEdgesCutAtTheBodysEnds(t *testing.T) {
	pairs := []pair{{from: []byte(valA), to: []byte(phA)}, {from: []byte(valB), to: []byte(phB)}}
	for name, tc := range map[string]struct{ body, want string }{
		"head":          {valB[20:] + " mid", phB[len(phB)-(len(valB)-20):] + " mid"},
		"tail":          {"mid " + valB[:30], "mid " + phB[:30]},
		"both":          {valB[9:] + "|" + valB[:9], phB + "|" + phB[:9]}, // the placeholder is shorter than 40
		"only a piece":  {valB[3:40], valB[3:40]},                         // neither edge: an echo of inner bytes is a residual risk
		"short edges":   {valB[len(valB)-7:] + "x" + valB[:7], valB[len(valB)-7:] + "x" + valB[:7]},
		"whole and cut": {valA + valB[:12], phA + phB[:12]},
	} {
		for _, one := range []bool{false, true} {
			var src io.Reader = strings.NewReader(tc.body)
			if one {
				src = iotest.OneByteReader(src)
			}
			got, err := io.ReadAll(newScrubReader(io.NopCloser(src), pairs, nil))
			if err != nil || string(got) != tc.want {
				t.Errorf("%s (one byte at a time %v): got %q (%v)\nwant %q", name, one, got, err, tc.want)
			}
		}
	}
}

// scrubSteps scrubs body (read 4 KiB at a time, as a slow origin's records
// arrive) with from as the only value, and returns the automaton's steps.
func scrubSteps(t testing.TB, from, body []byte) int {
	s := newScrubReader(io.NopCloser(iotest.HalfReader(bytes.NewReader(body))), []pair{{from: from, to: []byte(phA)}}, nil)
	s.buf = make([]byte, 4<<10)
	if _, err := io.Copy(io.Discard, s); err != nil {
		t.Fatal(err)
	}
	return s.steps
}

// adversarialScrub is the attack: a 4 KiB Basic token of 'A's (what
// base64 makes of zero bytes) that the scrubber looks for, and a 1 MiB
// body of 'A's, so every read's end is a long start of the token.
func adversarialScrub() (from, body []byte) {
	from = append(bytes.Repeat([]byte("A"), 4<<10-1), 'B')
	return from, bytes.Repeat([]byte("A"), 1<<20)
}

// TestScrubbingWorkIsLinearWhateverTheBody: the scrubber's work on a body
// built to look like the start of a long token at every read is within a
// small factor of its work on random bytes of the same size (a count of
// steps, not a clock). The quadratic scrubber compared every candidate
// length at every read: 811 KiB cost 13 s of CPU.
func TestScrubbingWorkIsLinearWhateverTheBody(t *testing.T) {
	from, body := adversarialScrub()
	random := make([]byte, len(body))
	for i := range random {
		random[i] = byte(i*7919>>3 ^ i)
	}
	bad, base := scrubSteps(t, from, body), scrubSteps(t, from, random)
	t.Logf("steps: adversarial %d, random %d, for %d bytes", bad, base, len(body))
	if bad > 4*base || bad > 4*len(body) {
		t.Fatalf("adversarial body: %d steps, random: %d, body %d bytes; want within 4x of random and of the body's size", bad, base, len(body))
	}
}

func BenchmarkScrubAdversarialBody(b *testing.B) {
	from, body := adversarialScrub()
	b.SetBytes(int64(len(body)))
	for range b.N {
		scrubSteps(b, from, body)
	}
}

func BenchmarkScrubRandomBody(b *testing.B) {
	from, body := adversarialScrub()
	for i := range body {
		body[i] = byte(i*7919>>3 ^ i)
	}
	b.SetBytes(int64(len(body)))
	for range b.N {
		scrubSteps(b, from, body)
	}
}

// TestPlaceholderPercentEncodedInTheTargetOrInATrailerIsMisdirected: the
// origin decodes the target, so the check must too (a malformed escape
// elsewhere must not stop it); a trailer is judged like the header.
func TestPlaceholderPercentEncodedInTheTargetOrInATrailerIsMisdirected(t *testing.T) {
	b := secret(t, "B", "b.example", phB, valB)
	for _, target := range []string{
		"/%65" + phB[1:],
		"/p?bad=%zz&k=%65%67" + phB[2:],
		"/p?k=%2565" + phB[1:],
		"/" + strings.ReplaceAll(phB, "-", "%2d"),
	} {
		if !misdirected(target, http.Header{}, []policy.Secret{b}) {
			t.Errorf("%q: the encoded placeholder was not caught", target)
		}
	}
	if misdirected("/%zz%", http.Header{}, []policy.Secret{b}) {
		t.Error("a malformed target without a placeholder was refused")
	}
	if !misdirectedTrailer(http.Header{"X-Key": {phB}}, []policy.Secret{b}) || misdirectedTrailer(http.Header{"X-Key": {phA}}, []policy.Secret{b}) {
		t.Error("trailer check")
	}
}
