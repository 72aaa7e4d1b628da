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
		"value":     {"X": {"x" + phB}},
		"name":      {phB: {"x"}},
		"canonical": {http.CanonicalHeaderKey(phB): {"x"}}, // as net/http stores a header name
		"basic":     {"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+phB))}},
		// Origins decode Basic leniently; round 4 sent these past the check.
		"basic unpadded": {"Authorization": {"Basic " + base64.RawStdEncoding.EncodeToString([]byte("u:"+phB))}},
		"basic url":      {"Authorization": {"Basic " + base64.RawURLEncoding.EncodeToString([]byte("uu?>:"+phB))}},
		// Node and Python skip bytes outside the alphabet (final attacker).
		"basic with a space inside": {"Authorization": {"Basic " + spliced(base64.StdEncoding.EncodeToString([]byte("user:"+phB)), " ")}},
		"basic with a dot inside":   {"Authorization": {"Basic " + spliced(base64.StdEncoding.EncodeToString([]byte("user:"+phB)), ".")}},
		"second item":               {"X": {"fine", phB}},
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

// TestScrubbingHoldsBackTheSameWhateverTheBody: what the scrubber releases
// before the body ends must not depend on whether the body's end could be
// the start of a value: a delay only for such ends told the integration,
// through an echoing origin, that its guess was the key's start.
func TestScrubbingHoldsBackTheSameWhateverTheBody(t *testing.T) {
	pairs := []pair{{from: []byte(valA), to: []byte(phA)}, {from: []byte(valB), to: []byte(phB)}}
	released := func(body string) string {
		pr, pw := io.Pipe()
		defer pw.Close()
		s := newScrubReader(pr, pairs, nil)
		go io.WriteString(pw, body)
		buf := make([]byte, 4096)
		n, err := s.Read(buf) // the first read releases what the scrubber will release
		if err != nil {
			t.Fatal(err)
		}
		return string(buf[:n])
	}
	lead := strings.Repeat("data: {\"delta\":\"hello\"}\n\n", 4)
	for k := 1; k < len(valA); k++ {
		guess := lead + valA[:k]
		wrong := lead + strings.Repeat("~", k)
		if g, w := released(guess), released(wrong); len(g) != len(w) {
			t.Fatalf("a body ending in %d bytes of a value released %d bytes, one ending in anything else %d", k, len(g), len(w))
		}
	}
}

// TestScrubbingRewritesNoPieceOfAValue: a piece of a value passes as it
// is, exactly as a wrong guess of the same length does; only whole values
// are replaced. Rewriting a body's edges when they matched a value's ends
// let the integration confirm a guess one character at a time.
func TestScrubbingRewritesNoPieceOfAValue(t *testing.T) {
	pairs := []pair{{from: []byte(valA), to: []byte(phA)}, {from: []byte(valB), to: []byte(phB)}}
	for name, tc := range map[string]struct{ body, want string }{
		"head":          {valB[20:] + " mid", valB[20:] + " mid"},
		"tail":          {"mid " + valB[:30], "mid " + valB[:30]},
		"inner":         {valB[3:40], valB[3:40]},
		"whole and cut": {valA + valB[:12], phA + valB[:12]},
		"split whole":   {"x" + valB + "y", "x" + phB + "y"},
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

// scrubBody scrubs body (read 4 KiB at a time, as a slow origin's records
// arrive) with from as the only value.
func scrubBody(t testing.TB, from, body []byte) {
	s := newScrubReader(io.NopCloser(iotest.HalfReader(bytes.NewReader(body))), []pair{{from: from, to: []byte(phA)}}, nil)
	s.room = 4 << 10
	if _, err := io.Copy(io.Discard, s); err != nil {
		t.Fatal(err)
	}
}

// adversarialScrub is the body that made an earlier scrubber quadratic: a
// 4 KiB Basic token of 'A's (what base64 makes of zero bytes) that the
// scrubber looks for, and a 1 MiB body of 'A's. Compare the two benchmarks
// below: the scrubber's matcher examines each byte at most a few times.
func adversarialScrub() (from, body []byte) {
	from = append(bytes.Repeat([]byte("A"), 4<<10-1), 'B')
	return from, bytes.Repeat([]byte("A"), 1<<20)
}

func BenchmarkScrubAdversarialBody(b *testing.B) {
	from, body := adversarialScrub()
	b.SetBytes(int64(len(body)))
	for range b.N {
		scrubBody(b, from, body)
	}
}

func BenchmarkScrubRandomBody(b *testing.B) {
	from, body := adversarialScrub()
	for i := range body {
		body[i] = byte(i*7919>>3 ^ i)
	}
	b.SetBytes(int64(len(body)))
	for range b.N {
		scrubBody(b, from, body)
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

// TestRedactedErrorsNameNoValue: an error from the reverse proxy quoted a
// request header after substitution ("backend tried to switch protocol
// \"websocket\" when \"websocket, VALUE\" was requested", round 4), and went to
// the audit log; every value is replaced by its placeholder first.
func TestRedactedErrorsNameNoValue(t *testing.T) {
	b := &broker{c: &Conn{Bound: []policy.Secret{secret(t, "A", "a.example", phA, valA)}, Unbound: []policy.Secret{secret(t, "B", "b.example", phB, valB)}}}
	got := b.redact(`backend tried to switch protocol "websocket" when "websocket, `+valA+`" was requested; `+valB, &reqState{})
	if strings.Contains(got, valA) || strings.Contains(got, valB) || !strings.Contains(got, phA) || !strings.Contains(got, phB) {
		t.Fatalf("redacted: %q", got)
	}
}

// spliced puts sep in the middle of s.
func spliced(s, sep string) string { return s[:len(s)/2] + sep + s[len(s)/2:] }

// TestRedactedErrorsNameNoBasicTokenEgressdBuilt: "Upgrade: Basic
// base64(PLACEHOLDER)" had the value substituted inside the token, and the
// reverse proxy's error quoted it, base64 and all (final attacker); redact
// applies the response scrubber's pairs, the built tokens included.
func TestRedactedErrorsNameNoBasicTokenEgressdBuilt(t *testing.T) {
	a := secret(t, "A", "a.example", phA, valA)
	b := &broker{c: &Conn{Bound: []policy.Secret{a}}}
	h := http.Header{"Upgrade": {"Basic " + base64.StdEncoding.EncodeToString([]byte(phA))}}
	_, echoes := substituteHeaders(h, []policy.Secret{a})
	built := strings.TrimPrefix(h.Get("Upgrade"), "Basic ")
	got := b.redact(`backend tried to switch protocol "websocket" when "Basic `+built+`" was requested`, &reqState{echoes: echoes})
	if strings.Contains(got, built) || strings.Contains(got, valA) {
		t.Fatalf("redacted: %q", got)
	}
}
