package broker

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/egressd/egressd/policy"
)

// FuzzSubstituteHeaders feeds header blocks (name: value lines) built from
// placeholders split, repeated, adjacent, inside Basic credentials and in
// malformed values. Invariants: an unbound secret's value never appears;
// no bound placeholder is left in a value or a well-formed Basic
// credential; another host's placeholder is always caught; no panic.
func FuzzSubstituteHeaders(f *testing.F) {
	f.Add("Authorization: Bearer "+phA+"\nX-K: "+phA+phA, "u:"+phA)
	f.Add("X: egressd-ph-AAAA\nY: AAAAAAAAAAAAAAAAAAAA", "egressd-ph-"+phA)
	f.Add("X: "+phB+"\nAuthorization: Basic !!!", phB+":"+phA)
	f.Add("Authorization: basic \nAuthorization: Basic ="+phA, "")
	f.Fuzz(func(t *testing.T, block, basic string) {
		if strings.Contains(block+basic, valA) || strings.Contains(block+basic, valB) {
			return // the fuzzer wrote a value itself: not a leak of ours
		}
		h := http.Header{}
		for _, line := range strings.Split(block, "\n") {
			name, value, _ := strings.Cut(line, ":")
			h[name] = append(h[name], value)
		}
		h["Authorization"] = append(h["Authorization"], "Basic "+base64.StdEncoding.EncodeToString([]byte(basic)))
		a, b := secret(t, "A", "a.example", phA, valA), secret(t, "B", "b.example", phB, valB)
		carries := strings.Contains(block, phB) || strings.Contains(basic, phB)
		mayCarry := strings.Contains(strings.ToLower(block+basic), strings.ToLower(phB)) // a header name, in any case
		if got := misdirected("/", h, []policy.Secret{b}); (carries && !got) || (got && !mayCarry) {
			t.Fatalf("misdirected = %v; carries B's placeholder: %v", got, carries)
		}
		wantUsed := false
		for _, values := range h {
			for _, v := range values {
				d, _, _ := basicCredential(v)
				wantUsed = wantUsed || strings.Contains(v, phA) || strings.Contains(d, phA)
			}
		}
		used, echoes := substituteHeaders(h, []policy.Secret{a})
		for name, values := range h {
			for _, v := range values {
				if strings.Contains(v, valB) {
					t.Fatalf("%s: the unbound value appeared: %q", name, v)
				}
				if strings.Contains(v, phA) {
					t.Fatalf("%s: a bound placeholder was left: %q", name, v)
				}
				if d, _, ok := basicCredential(v); ok && (strings.Contains(d, phA) || strings.Contains(d, valB)) {
					t.Fatalf("%s: Basic credential still carries %q", name, d)
				}
			}
		}
		if len(used) > 1 || (len(used) == 1) != wantUsed {
			t.Fatalf("used %v", used)
		}
		for _, e := range echoes {
			if bytes.Contains(e.to, []byte(valA)) {
				t.Fatalf("an echo pair would write the value back: %q", e.to)
			}
		}
	})
}

// FuzzScrubBody streams a body through both layers of a response scrubber
// in reads of every size: the output must equal the reference replacement
// of the whole body (replaceLeftmostLongest of the values, then of the
// built tokens), and no bound value may survive, even where a built token
// ends with a value's first bytes (round 24).
func FuzzScrubBody(f *testing.F) {
	f.Add([]byte("x"+valA+"y"+valB), uint8(1))
	f.Add([]byte(valA[:7]+valA+valA[7:]), uint8(3))
	f.Add([]byte("tok:"+valB+valA), uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, step uint8) {
		if bytes.Contains(body, []byte(phA)) || bytes.Contains(body, []byte(phB)) {
			return
		}
		set := scrubSet{
			values: []pair{{from: []byte(valA), to: []byte(phA)}, {from: []byte(valB), to: []byte(phB)}},
			built:  []pair{{from: []byte("tok:" + valB[:5]), to: []byte("<tok>")}},
		}
		whole := replaceLeftmostLongest(replaceLeftmostLongest(body, set.values), set.built)
		var src io.Reader = bytes.NewReader(body)
		if step%2 == 1 {
			src = iotest.OneByteReader(src)
		} else {
			src = iotest.HalfReader(src)
		}
		got, err := io.ReadAll(newResponseScrubber(io.NopCloser(src), set, nil))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, whole) {
			t.Fatalf("streamed %q, whole %q", got, whole)
		}
		if bytes.Contains(got, []byte(valA)) || bytes.Contains(got, []byte(valB)) {
			t.Fatalf("a value survived: %q", got)
		}
	})
}

// FuzzScrubHeaderNames puts a secret's value, or its base64 at any offset
// in either alphabet, into a header name between fuzzed bytes and in a
// fuzzed case, as an origin reflecting it into a name would (and as
// net/http's canonicalising would re-case it). Invariant: after
// scrubHeader no name holds the value or the part of its base64 only the
// value's bits decide, in any case; a name without them is kept.
func FuzzScrubHeaderNames(f *testing.F) {
	f.Add("X-", "-Echo", uint64(0), uint8(0))
	f.Add("", "", uint64(0xaaaaaaaaaaaaaaaa), uint8(3))
	f.Add("x-b64-", "", uint64(1), uint8(7))
	f.Fuzz(func(t *testing.T, before, after string, caseMask uint64, form uint8) {
		a := secret(t, "A", "a.example", phA, valA)
		reflected := valA
		if form%4 != 0 {
			lead := strings.Repeat("u", int(form%4-1))
			enc := []*base64.Encoding{base64.StdEncoding, base64.URLEncoding}[form/4%2]
			reflected = enc.EncodeToString([]byte(lead + valA))
		}
		recased := []byte(reflected)
		for i := range recased {
			if caseMask>>(i%64)&1 == 1 {
				recased[i] = bytes.ToUpper(recased[i : i+1])[0]
			} else {
				recased[i] = bytes.ToLower(recased[i : i+1])[0]
			}
		}
		h := http.Header{before + string(recased) + after: {"1"}, "X-Kept": {"1"}}
		pairs := scrubPairs([]policy.Secret{a}, nil)
		scrubHeader(h, pairs)
		for name := range h {
			for _, p := range pairs.all() {
				if strings.Contains(strings.ToLower(name), strings.ToLower(string(p.from))) {
					t.Fatalf("name %q still holds %q", name, p.from)
				}
			}
		}
		if h.Get("X-Kept") != "1" {
			t.Fatal("a name holding no value was dropped")
		}
	})
}
