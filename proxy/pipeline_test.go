package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
	"golang.org/x/crypto/cryptobyte"
)

// recordingFrontEnd is a TLS front end that routes on the last ClientHello
// it reads: it reads the first hello, answers with answer (a
// HelloRetryRequest invites the second hello an attacker pipelined), and
// reports every byte it read after the first hello until the connection
// closes, or until it holds want bytes, when it answers once more.
func recordingFrontEnd(t *testing.T, answer []byte, want int) (port uint16, after chan []byte) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	after = make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(c)
		if _, _, err := ReadClientHello(br); err != nil {
			after <- []byte("first hello: " + err.Error())
			return
		}
		c.Write(answer)
		if want > 0 {
			got := make([]byte, want)
			n, _ := io.ReadFull(br, got)
			after <- got[:n]
			c.Write(answer)
			io.Copy(io.Discard, br)
			return
		}
		got, _ := io.ReadAll(br)
		after <- got
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port), after
}

// serverHelloRecord is a ServerHello that is not a retry request: the
// server has chosen its parameters and is past reading a ClientHello.
func serverHelloRecord() []byte {
	rec := helloRetryRecord()
	copy(rec[tlsRecordHeaderLen+handshakeHeaderLen+2:], bytes.Repeat([]byte{7}, 32))
	return rec
}

// earlyData is what a TLS 1.3 client sends behind a ClientHello offering
// 0-RTT, before any answer: the middlebox-compatibility ChangeCipherSpec
// and an encrypted application_data record.
func earlyData() []byte {
	var b cryptobyte.Builder
	b.AddBytes([]byte{recordTypeChangeCipherSpec, 3, 3, 0, 1, 1})
	b.AddUint8(23)
	b.AddUint16(0x0303)
	b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(bytes.Repeat([]byte{0xee}, 300)) })
	return b.BytesOrPanic()
}

// TestSecondClientHelloPipelinedInTheSameWriteNeverReachesTheOrigin: the
// first ClientHello was checked, then everything the client had already
// sent behind it was forwarded with it. A second hello naming another host,
// in the same write, reached a front end that answers the first with a
// HelloRetryRequest and routes on the second: domain fronting. Every record
// the client sends before the origin has answered is now checked; the
// second hello closes the tunnel, sni_mismatch with its server_name in the
// audit line, and the origin reads nothing after the first hello.
func TestSecondClientHelloPipelinedInTheSameWriteNeverReachesTheOrigin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		behind []byte
		want   map[string]any
	}{
		{"hello_for_another_host", buildHello(helloSpec{names: []string{"evil.allowed.example"}}),
			map[string]any{"reason": "sni_mismatch", "sni": "evil.allowed.example"}},
		{"hello_with_ech", buildHello(helloSpec{names: []string{"api.allowed.example"}, extra: []uint16{extEncryptedClientHello}}),
			map[string]any{"reason": "ech_present"}},
		{"plaintext_request", []byte("GET / HTTP/1.1\r\nHost: evil.allowed.example\r\n\r\n"),
			map[string]any{"reason": "not_tls"}},
		{"heartbeat_record", []byte{24, 3, 3, 0, 3, 1, 0, 0}, map[string]any{"reason": "not_tls"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port, after := recordingFrontEnd(t, helloRetryRecord(), 0)
			e := newEnv(t, withConfig(func(c *policy.Config) {
				c.Integrations[0].Exemptions.AllowPorts = append(c.Integrations[0].Exemptions.AllowPorts, port)
			}))
			e.resolveToOrigin("api.allowed.example")
			c, _, resp := e.rawConnect("CONNECT api.allowed.example:" + itoa(port) + " HTTP/1.1\r\n\r\n")
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT: %d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
			}
			c.Write(append(buildHello(helloSpec{names: []string{"api.allowed.example"}}), tc.behind...))
			if got := <-after; len(got) != 0 {
				t.Fatalf("the origin read %d bytes after the first hello (%d were sent)", len(got), len(tc.behind))
			}
			tc.want["event"], tc.want["decision"] = "connect", "deny"
			e.log.waitEvent(t, tc.want)
		})
	}
}

// TestEarlyDataPipelinedBehindOneClientHelloReachesTheOriginBeforeItAnswers:
// checking what follows the first hello must not hold it back. A 0-RTT
// client's ChangeCipherSpec and early data, in the same write as its one
// ClientHello, reach the origin before the origin answers, byte for byte,
// and the origin's answer reaches the client.
func TestEarlyDataPipelinedBehindOneClientHelloReachesTheOriginBeforeItAnswers(t *testing.T) {
	early := earlyData()
	port, after := recordingFrontEnd(t, serverHelloRecord(), len(early))
	e := newEnv(t, withConfig(func(c *policy.Config) {
		c.Integrations[0].Exemptions.AllowPorts = append(c.Integrations[0].Exemptions.AllowPorts, port)
	}))
	e.resolveToOrigin("api.allowed.example")
	c, br, resp := e.rawConnect("CONNECT api.allowed.example:" + itoa(port) + " HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
	}
	c.Write(append(buildHello(helloSpec{names: []string{"api.allowed.example"}}), early...))
	if got := <-after; !bytes.Equal(got, early) {
		t.Fatalf("the origin read %d bytes of early data, want %d", len(got), len(early))
	}
	for i := 0; i < 2; i++ {
		if rec, err := readRecord(br); err != nil || !bytes.Equal(rec, serverHelloRecord()) {
			t.Fatalf("answer %d not relayed: %v", i, err)
		}
	}
}

// TestRealHandshakesPassTheClientHelloGuard: real Go clients through the
// proxy, against real TLS servers, where the client's later cleartext
// handshake could be mistaken for a hello: TLS 1.3 with a real
// HelloRetryRequest (the server wants P-256, the client offers X25519
// first), and TLS 1.2, whose ClientKeyExchange is a cleartext handshake
// record sent after the server's first answer.
func TestRealHandshakesPassTheClientHelloGuard(t *testing.T) {
	e := newEnv(t)
	e.resolveToOrigin("api.allowed.example")
	for _, tc := range []struct {
		name   string
		server *tls.Config
		client *tls.Config
	}{
		{"tls13_hello_retry", &tls.Config{CurvePreferences: []tls.CurveID{tls.CurveP256}},
			&tls.Config{CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256}}},
		{"tls12", &tls.Config{MaxVersion: tls.VersionTLS12}, &tls.Config{MaxVersion: tls.VersionTLS12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.2:0")
			if err != nil {
				t.Fatal(err)
			}
			tc.server.Certificates = []tls.Certificate{e.ca.Leaf(t, "api.allowed.example")}
			rec := &recordingListener{Listener: ln}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
			go srv.Serve(tls.NewListener(rec, tc.server))
			t.Cleanup(func() { srv.Close() })
			port := uint16(ln.Addr().(*net.TCPAddr).Port)
			e.cfg.Integrations[0].Exemptions.AllowPorts = append(e.cfg.Integrations[0].Exemptions.AllowPorts, port)
			e.registry.Load(e.cfg)
			client := e.client()
			tc.client.RootCAs = e.ca.Pool
			client.Transport.(*http.Transport).TLSClientConfig = tc.client
			resp, err := client.Get("https://api.allowed.example:" + itoa(port) + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "ok" || (tc.name == "tls12") != (resp.TLS.Version == tls.VersionTLS12) {
				t.Fatalf("body %q version %x", body, resp.TLS.Version)
			}
			if hellos := rec.hellos(); (tc.name == "tls13_hello_retry") != (hellos == 2) {
				t.Fatalf("the server read %d ClientHellos", hellos)
			}
		})
	}
}

// recordingListener keeps what the server read on its first connection,
// to count the ClientHellos it was sent.
type recordingListener struct {
	net.Listener
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordedConn{Conn: c, l: l}, nil
}

type recordedConn struct {
	net.Conn
	l *recordingListener
}

func (c *recordedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	c.l.buf.Write(p[:n])
	c.l.mu.Unlock()
	return n, err
}

// hellos counts the ClientHellos at the start of what was read: one, or
// two with a ChangeCipherSpec between them after a HelloRetryRequest.
func (l *recordingListener) hellos() int {
	l.mu.Lock()
	br := bufio.NewReader(bytes.NewReader(l.buf.Bytes()))
	l.mu.Unlock()
	if _, _, err := ReadClientHello(br); err != nil {
		return 0
	}
	if b, err := br.Peek(1); err == nil && b[0] == recordTypeChangeCipherSpec {
		readRecord(br)
	}
	if _, _, err := ReadClientHello(br); err != nil {
		return 1
	}
	return 2
}
