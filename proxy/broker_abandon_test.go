package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// endlessAnswer answers with a head, then body until the write fails (the
// broker gave the answer up), then closes done.
func endlessAnswer(done chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		w.WriteHeader(200)
		chunk := strings.Repeat("x", 16<<10)
		rc := http.NewResponseController(w)
		for {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
	}
}

// brokeredTLS opens a CONNECT to the bound host and a TLS connection over
// it offering proto, trusting egressd's broker CA.
func (b *brokerEnv) brokeredTLS(t *testing.T, proto string) (*tls.Conn, string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.bca.CertPEM())
	target := net.JoinHostPort("api.allowed.example", itoa(b.origin.addr.Port()))
	raw, _, resp := b.rawConnect("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	tc := tls.Client(raw, &tls.Config{ServerName: "api.allowed.example", RootCAs: pool, NextProtos: []string{proto}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return tc, target
}

// TestBrokerAnswerAbandonedMidBodyStillLeavesTheRequestRecord: the program
// reads the head of the answer to a request that carried the value, then
// walks away (HTTP/1.1: closes the connection; HTTP/2: resets the stream,
// its window at zero so no body could come). ReverseProxy then aborts the
// handler with a panic; the origin got the value all the same, so the
// audit log must name the host and the secret.
func TestBrokerAnswerAbandonedMidBodyStillLeavesTheRequestRecord(t *testing.T) {
	t.Run("http1.1 close mid-body", func(t *testing.T) {
		done := make(chan struct{})
		b := newBrokerEnv(t, false, endlessAnswer(done))
		tc, target := b.brokeredTLS(t, "http/1.1")
		io.WriteString(tc, "POST /v1/store?key=q HTTP/1.1\r\nHost: "+target+"\r\nAuthorization: Bearer "+tokenPH+"\r\nContent-Length: 4\r\n\r\ndata")
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("head: %v %v", resp, err)
		}
		if _, err := io.ReadFull(resp.Body, make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
		tc.Close() // mid-body
		<-done
		wantAbandonedRecorded(t, b, "POST", "/v1/store")
	})
	t.Run("h2 stream reset after the head", func(t *testing.T) {
		done := make(chan struct{})
		b := newBrokerEnv(t, false, endlessAnswer(done))
		tc, target := b.brokeredTLS(t, "h2")
		io.WriteString(tc, http2.ClientPreface)
		fr := http2.NewFramer(tc, tc)
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", target}, {":path", "/v1/items?key=q"}, {"authorization", "Bearer " + tokenPH}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf("before the head: %v", err)
			}
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
				fr.WriteSettingsAck()
			}
			if _, ok := f.(*http2.HeadersFrame); ok {
				break
			}
		}
		fr.WriteRSTStream(1, http2.ErrCodeCancel)
		<-done
		wantAbandonedRecorded(t, b, "GET", "/v1/items")
	})
}

// wantAbandonedRecorded checks the origin got the value and the audit log
// has the request's record: host, method, path, the secret by name.
func wantAbandonedRecorded(t *testing.T, b *brokerEnv, method, path string) {
	t.Helper()
	if reqs := b.origin.requests(); len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer "+tokenValue {
		t.Fatalf("the origin did not receive the value once: %v", reqs)
	}
	ev := b.log.waitEvent(t, map[string]any{"event": "request", "host": "api.allowed.example", "method": method, "path": path})
	if names, _ := ev["secrets"].([]any); len(names) != 1 || names[0] != "TOKEN" {
		t.Errorf("request record secrets = %v, want [TOKEN]", ev["secrets"])
	}
	b.log.waitEvent(t, map[string]any{"event": "response", "conn": ev["conn"], "req": ev["req"], "error": "the client went away before the end of the answer"})
	noValueIn(t, "the audit log", b.log.String())
}

// TestBrokerRequestRecordIsWrittenBeforeTheValueReachesTheOrigin: when the
// origin holds the request with the value, the audit log already names
// the host and the secret (a crash, a kill or a panic after that point
// cannot leave the value's trip unrecorded); the outcome follows as a
// response event with the same conn and req.
func TestBrokerRequestRecordIsWrittenBeforeTheValueReachesTheOrigin(t *testing.T) {
	for _, c := range []struct{ clientH2, originH2 bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		h2 := c.clientH2
		name := map[bool]string{false: "client http1.1", true: "client h2"}[h2] + ", " + map[bool]string{false: "origin http1.1", true: "origin h2"}[c.originH2]
		t.Run(name, func(t *testing.T) {
			var b *brokerEnv
			recordedFirst := make(chan bool, 1)
			b = newBrokerEnv(t, c.originH2, func(w http.ResponseWriter, r *http.Request) {
				recordedFirst <- b.log.has(t, map[string]any{"event": "request", "host": "api.allowed.example", "method": "GET"})
				io.WriteString(w, "ok")
			})
			resp, body := do(t, b.client(h2), b.credentialRequest(t, "api.allowed.example"))
			if resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("status %d body %q", resp.StatusCode, body)
			}
			if !<-recordedFirst {
				t.Fatalf("the origin held the value before the audit log had its record:\n%s", b.log.String())
			}
			req := b.log.waitEvent(t, map[string]any{"event": "request", "host": "api.allowed.example"})
			if names, _ := req["secrets"].([]any); len(names) != 1 || names[0] != "TOKEN" {
				t.Errorf("request record secrets = %v, want [TOKEN]", req["secrets"])
			}
			if _, ok := req["status"]; ok {
				t.Errorf("the request record, written before the answer, has a status: %v", req)
			}
			out := b.log.waitEvent(t, map[string]any{"event": "response", "conn": req["conn"], "req": req["req"], "status": 200})
			if out["bytes_down"] != float64(2) {
				t.Errorf("outcome %v: want bytes_down 2", out)
			}
			noValueIn(t, "the audit log", b.log.String())
		})
	}
}
