package proxy

import (
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/egressd/egressd/policy"
)

// TestBrokerBodyLabelledWithAnEncodingItCannotReadIsRefused: the body was
// scrubbed only when its Content-Encoding was empty or exactly "identity";
// every other label passed it as the origin sent it. A plain echo labelled
// "utf-8" or "none" (misconfigured servers; clients just read it) handed
// the program the real value, and so did gzip labelled "x-gzip", "gzip,
// identity" or in two fields, which Go's transport does not decompress
// but the program does. A body egressd cannot read is one it cannot
// scrub: it is refused (502 response_refused), whatever the label; a body
// whose labels are all "identity" is plain and comes back scrubbed, as
// gzip the transport asked for and decompressed does.
func TestBrokerBodyLabelledWithAnEncodingItCannotReadIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		labels   []string
		gzip     bool
		readable bool // egressd reads it as it is, and scrubs it
	}{
		{"utf-8 on a plain body", []string{"utf-8"}, false, false},
		{"none on a plain body", []string{"none"}, false, false},
		{"identity twice on a plain body", []string{"identity, identity"}, false, true},
		{"x-gzip", []string{"x-gzip"}, true, false},
		{"gzip, identity", []string{"gzip, identity"}, true, false},
		{"identity then gzip in two fields", []string{"identity", "gzip"}, true, false},
		{"brotli label on gzip bytes", []string{"br"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBrokerEnv(t, false, func(w http.ResponseWriter, r *http.Request) {
				for _, l := range tc.labels {
					w.Header().Add("Content-Encoding", l)
				}
				echo := "you sent: " + r.Header.Get("Authorization") + "\n"
				if !tc.gzip {
					io.WriteString(w, echo)
					return
				}
				zw := gzip.NewWriter(w)
				io.WriteString(zw, echo)
				zw.Close()
			})
			c := b.client(false)
			c.Transport.(*http.Transport).DisableCompression = true // the program reads the bytes as sent
			resp, body := do(t, c, b.credentialRequest(t, "api.allowed.example"))
			if reqs := b.origin.requests(); len(reqs) != 1 || !strings.Contains(reqs[0].Header.Get("Authorization"), tokenValue) {
				t.Fatalf("the origin did not receive the value: %d requests", len(reqs))
			}
			plain := body
			if zr, err := gzip.NewReader(strings.NewReader(body)); err == nil {
				if b, err := io.ReadAll(zr); err == nil {
					plain = string(b)
				}
			}
			noValueIn(t, "the body the program decoded", plain)
			if tc.readable {
				if resp.StatusCode != 200 || plain != "you sent: Bearer "+tokenPH+"\n" {
					t.Fatalf("status %d body %q, want 200 and the placeholder", resp.StatusCode, plain)
				}
				return
			}
			if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(ReasonHeader) != string(policy.ResponseRefused) {
				t.Fatalf("status %d reason %q body %q, want 502 response_refused", resp.StatusCode, resp.Header.Get(ReasonHeader), body)
			}
		})
	}
}

// TestBrokerDoubleGzipEchoIsNeverHandedBackCompressed: egressd let Go's
// transport ask for gzip and decompress it; the transport decompresses
// when the FIRST Content-Encoding field is "gzip", strips one layer, and
// deletes every field. A bound origin that gzips its echo twice with two
// fields ("gzip" then "gzip", "br" or "identity") left a gzip layer with
// no label left to refuse: the program gunzipped the real value (round 12
// attacker, real serve binary). egressd now asks the origin for identity
// and decompresses nothing, so any label on the answer is an encoding it
// cannot read, refused.
func TestBrokerDoubleGzipEchoIsNeverHandedBackCompressed(t *testing.T) {
	gz := func(b []byte) []byte {
		var out strings.Builder
		zw := gzip.NewWriter(&out)
		zw.Write(b)
		zw.Close()
		return []byte(out.String())
	}
	for _, second := range []string{"gzip", "br", "identity", ""} {
		t.Run("gzip then "+second, func(t *testing.T) {
			b := newBrokerEnv(t, false, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Add("Content-Encoding", "gzip")
				if second != "" {
					w.Header().Add("Content-Encoding", second)
				}
				w.Write(gz(gz([]byte("you sent: " + r.Header.Get("Authorization") + "\n"))))
			})
			c := b.client(false)
			c.Transport.(*http.Transport).DisableCompression = true
			resp, body := do(t, c, b.credentialRequest(t, "api.allowed.example"))
			plain := body
			for range 3 { // the program peels every gzip layer it finds
				zr, err := gzip.NewReader(strings.NewReader(plain))
				if err != nil {
					break
				}
				b, err := io.ReadAll(zr)
				if err != nil {
					break
				}
				plain = string(b)
			}
			noValueIn(t, "the body the program decoded", plain)
			if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(ReasonHeader) != string(policy.ResponseRefused) {
				t.Fatalf("status %d reason %q, want 502 response_refused", resp.StatusCode, resp.Header.Get(ReasonHeader))
			}
		})
	}
}
