package broker

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"testing"
	"testing/iotest"

	"github.com/egressd/egressd/policy"
)

// basicLines are n Basic credentials carrying ph, each a distinct token.
func basicLines(n int, ph string) []string {
	var out []string
	for i := range n {
		out = append(out, "Basic "+base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("{%05d:%s", i, ph))))
	}
	return out
}

// TestScrubPairsOfAResponseAreBoundedWhateverTheRequests: the scrubber's
// work is the body times its pairs; 6000 Basic lines in one request made
// 6000 pairs. However many Basic credentials one request or twenty
// requests carry, one response is searched for at most one pair per
// secret, maxBuiltTokens remembered tokens and maxBasicPerRequest of its
// own; check refuses the request past maxBasicPerRequest.
func TestScrubPairsOfAResponseAreBoundedWhateverTheRequests(t *testing.T) {
	a := secret(t, "A", "a.example", phA, valA)
	b := &broker{c: &Conn{Bound: []policy.Secret{a}}, built: NewBuiltTokens()}
	var st *reqState
	for range 20 {
		h := http.Header{"X-Echo": basicLines(300, phA)}
		if n := basicCarrying(h, b.c.Bound); n != 300 {
			t.Fatalf("counted %d Basic credentials carrying the placeholder, want 300", n)
		}
		st = &reqState{}
		st.used, st.echoes = substituteHeaders(h, b.c.Bound)
		b.built.remember(b.c.Host, st.echoes)
	}
	want := pairsPerSecret + maxBuiltTokens + maxBasicPerRequest
	if got := len(b.pairs(st).all()); got > want {
		t.Fatalf("a response is scrubbed with %d pairs, want at most %d", got, want)
	}
}

// TestScrubbingManyValuesWithManyPairsMatchesAReplaceAll: with a body
// full of values and many pairs, the output is exactly a leftmost-longest
// replacement of every whole value.
func TestScrubbingManyValuesWithManyPairsMatchesAReplaceAll(t *testing.T) {
	var pairs []pair
	for i := range 20 {
		pairs = append(pairs, pair{from: []byte(fmt.Sprintf("value-%02d-xyz", i)), to: []byte(fmt.Sprintf("<%d>", i))})
	}
	var body, want bytes.Buffer
	for i := range 5000 {
		p := pairs[(i*7)%len(pairs)]
		fmt.Fprintf(&body, "..%d..%s", i, p.from)
		fmt.Fprintf(&want, "..%d..%s", i, p.to)
	}
	for _, one := range []bool{false, true} {
		var src io.Reader = bytes.NewReader(body.Bytes())
		if one {
			src = iotest.OneByteReader(src)
		}
		got, err := io.ReadAll(newScrubReader(io.NopCloser(src), pairs, nil))
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("one byte at a time %v: scrubbed body differs (%v)", one, err)
		}
	}
}

// BenchmarkScrubManyMatchesManyPairs: a body full of values, searched for
// as many pairs as a response can have.
func BenchmarkScrubManyMatchesManyPairs(b *testing.B) {
	var pairs []pair
	for i := range 1 + maxBuiltTokens + maxBasicPerRequest {
		pairs = append(pairs, pair{from: []byte(fmt.Sprintf("value-%02d-xyz-0123456789", i)), to: []byte("x")})
	}
	body := bytes.Repeat(append([]byte("...."), pairs[0].from...), (1<<20)/30)
	b.SetBytes(int64(len(body)))
	for range b.N {
		io.Copy(io.Discard, newScrubReader(io.NopCloser(bytes.NewReader(body)), pairs, nil))
	}
}

// TestAnyBase64BlobHoldingAValueIsScrubbedWithNoTokenRemembered: with no
// Basic token remembered (a new broker, or one evicted), a base64 blob an
// origin stored with the value anywhere inside, in either alphabet,
// padded or not, comes back without the value in what it decodes to.
func TestAnyBase64BlobHoldingAValueIsScrubbedWithNoTokenRemembered(t *testing.T) {
	a := secret(t, "A", "a.example", phA, valA)
	b := &broker{c: &Conn{Bound: []policy.Secret{a}}, built: NewBuiltTokens()}
	pairs := b.pairs(&reqState{}).all()
	if len(pairs) > pairsPerSecret {
		t.Fatalf("one secret makes %d pairs, want at most %d", len(pairs), pairsPerSecret)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		for pre := range 7 {
			for post := range 4 {
				plain := bytes.Repeat([]byte{0xfb}, pre)
				plain = append(append(plain, valA...), bytes.Repeat([]byte{0xff}, post)...)
				blob := enc.EncodeToString(plain)
				body, err := io.ReadAll(newScrubReader(io.NopCloser(iotest.OneByteReader(bytes.NewReader([]byte("x="+blob+";")))), pairs, nil))
				if err != nil {
					t.Fatal(err)
				}
				inner := bytes.TrimSuffix(bytes.TrimPrefix(body, []byte("x=")), []byte(";"))
				decoded, _ := enc.DecodeString(string(inner))
				if bytes.Contains(decoded, []byte(valA)) || bytes.Contains(body, []byte(blob)) {
					t.Fatalf("prefix %d suffix %d: %q came back as %q", pre, post, blob, body)
				}
			}
		}
	}
}
