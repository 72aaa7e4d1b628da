package proxy

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestBrokerH2HostFieldDisagreeingWithAuthorityIsRefused: an HTTP/2
// request whose :authority is the bound host but which also carries a
// "host: evil.example" field. Go's transports drop the field today, so
// nothing leaks; but a Host and an authority that disagree are refused
// host_mismatch like any other, not left to a transport detail.
func TestBrokerH2HostFieldDisagreeingWithAuthorityIsRefused(t *testing.T) {
	b := newBrokerEnv(t, false, nil)
	tc, target := b.brokeredTLS(t, "h2")
	io.WriteString(tc, http2.ClientPreface)
	fr := http2.NewFramer(tc, tc)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", target}, {":path", "/v1"}, {"host", "evil.example"}, {"authorization", "Bearer " + tokenPH}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
	dec := hpack.NewDecoder(4096, nil)
	var answer []hpack.HeaderField
	for answer == nil {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			if answer, err = dec.DecodeFull(f.HeaderBlockFragment()); err != nil {
				t.Fatal(err)
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset (%v), want a 403 host_mismatch", f.ErrCode)
		}
	}
	got := map[string]string{}
	for _, f := range answer {
		got[f.Name] = f.Value
	}
	if got[":status"] != "403" || got[strings.ToLower(ReasonHeader)] != "host_mismatch" {
		t.Fatalf("answer %v, want 403 host_mismatch", got)
	}
	if reqs := b.origin.requests(); len(reqs) != 0 {
		t.Fatalf("the origin received %d requests, want none", len(reqs))
	}
	b.log.waitEvent(t, map[string]any{"event": "request", "reason": "host_mismatch", "decision": "deny"})
}
