package proxy

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
	"golang.org/x/crypto/cryptobyte"
)

// helloRetryRecord is a HelloRetryRequest record as a TLS 1.3 server sends
// it: a ServerHello with the retry random, asking for a P-256 key share.
func helloRetryRecord() []byte {
	var body cryptobyte.Builder
	body.AddUint16(0x0303)
	body.AddBytes(helloRetryRandom)
	body.AddUint8(0)
	body.AddUint16(0x1301)
	body.AddUint8(0)
	body.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) {
		b.AddUint16(0x002b) // supported_versions: TLS 1.3
		b.AddUint16(2)
		b.AddUint16(0x0304)
		b.AddUint16(0x0033) // key_share: selected group secp256r1
		b.AddUint16(2)
		b.AddUint16(0x0017)
	})
	var hs cryptobyte.Builder
	hs.AddUint8(handshakeTypeServerHello)
	hs.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { b.AddBytes(body.BytesOrPanic()) })
	msg := hs.BytesOrPanic()
	return append([]byte{recordTypeHandshake, 3, 3, byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

// frontEnd is a shared TLS front end that routes on the ClientHello it is
// handed last: it answers the first hello with a HelloRetryRequest and
// reports the server_name of the second, or that the connection closed
// before one came.
func frontEnd(t *testing.T) (port uint16, second chan string) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	second = make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		br := bufio.NewReader(c)
		if _, _, err := ReadClientHello(br); err != nil {
			second <- "first hello: " + err.Error()
			return
		}
		c.Write(helloRetryRecord())
		if b, err := br.Peek(1); err == nil && b[0] == recordTypeChangeCipherSpec {
			readRecord(br)
		}
		_, sni, err := ReadClientHello(br)
		if err != nil {
			second <- "closed before a second hello"
			return
		}
		second <- "second hello for " + sni.String()
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port), second
}

// TestSecondClientHelloAfterARetryRequestIsChecked: only a tunnel's first
// ClientHello was checked, so after a HelloRetryRequest a client could send
// a second hello naming another host, and a front end routing on it would
// serve that host (domain fronting). The second hello is now held to the
// same checks; one naming another host closes the tunnel, sni_mismatch,
// before the front end sees it. A second hello for the same host (with a
// middlebox-compatibility ChangeCipherSpec before it) goes through.
func TestSecondClientHelloAfterARetryRequestIsChecked(t *testing.T) {
	for _, tc := range []struct {
		name, secondSNI, want string
	}{
		{"another host", "evil.allowed.example", "closed before a second hello"},
		{"the same host", "api.allowed.example", "second hello for api.allowed.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port, second := frontEnd(t)
			e := newEnv(t, withConfig(func(c *policy.Config) {
				c.Integrations[0].Exemptions.AllowPorts = append(c.Integrations[0].Exemptions.AllowPorts, port)
			}))
			e.resolveToOrigin("api.allowed.example")
			c, br, resp := e.rawConnect("CONNECT api.allowed.example:" + itoa(port) + " HTTP/1.1\r\n\r\n")
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT: %d %s", resp.StatusCode, resp.Header.Get(ReasonHeader))
			}
			c.Write(buildHello(helloSpec{names: []string{"api.allowed.example"}}))
			hrr, err := readRecord(br)
			if err != nil || !isHelloRetry(hrr) {
				t.Fatalf("the HelloRetryRequest was not relayed: %v %x", err, hrr)
			}
			c.Write([]byte{recordTypeChangeCipherSpec, 3, 3, 0, 1, 1})
			c.Write(buildHello(helloSpec{names: []string{tc.secondSNI}}))
			if got := <-second; got != tc.want {
				t.Fatalf("the front end saw: %s", got)
			}
			if tc.secondSNI != "api.allowed.example" {
				e.log.waitEvent(t, map[string]any{"decision": "deny", "reason": "sni_mismatch",
					"msg": "second ClientHello, after a HelloRetryRequest: server_name evil.allowed.example is not the CONNECT host api.allowed.example"})
			}
		})
	}
}
