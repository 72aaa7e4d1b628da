package proxy

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
)

// rawOrigin accepts connections, reads and drops the first TLS record (the
// ClientHello egressd requires), answers it, then either discards
// everything (sink) or streams zeros until the client closes (source).
func rawOrigin(b *testing.B, ip string, source bool) *net.TCPListener {
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				hdr := make([]byte, 5)
				if _, err := io.ReadFull(c, hdr); err != nil {
					return
				}
				io.CopyN(io.Discard, c, int64(hdr[3])<<8|int64(hdr[4]))
				// Answer as a TLS server would: egressd holds the
				// client's next bytes until the server's first record.
				if _, err := c.Write(benchServerHello); err != nil {
					return
				}
				if source {
					buf := make([]byte, 256<<10)
					for {
						if _, err := c.Write(buf); err != nil {
							return
						}
					}
				}
				io.Copy(io.Discard, c)
			}()
		}
	}()
	return ln.(*net.TCPListener)
}

const benchChunk = 256 << 10

// BenchmarkTunnelUpload measures single-tunnel raw throughput client→origin,
// direct and through egressd, in the same run. Report the ratio of the two
// MB/s figures.
func BenchmarkTunnelUpload(b *testing.B) {
	benchTunnel(b, false, func(c net.Conn, buf []byte) error { _, err := c.Write(buf); return err })
}

// BenchmarkTunnelDownload is the same, origin→client.
func BenchmarkTunnelDownload(b *testing.B) {
	benchTunnel(b, true, func(c net.Conn, buf []byte) error { _, err := io.ReadFull(c, buf); return err })
}

func benchTunnel(b *testing.B, source bool, move func(net.Conn, []byte) error) {
	for _, via := range []string{"direct", "egressd"} {
		b.Run(via, func(b *testing.B) {
			e := newEnv(b)
			ln := rawOrigin(b, "127.0.0.2", source)
			e.resolveToOrigin("api.allowed.example")
			e.cfg.Integrations[0].Exemptions.AllowPorts = append(e.cfg.Integrations[0].Exemptions.AllowPorts, uint16(ln.Addr().(*net.TCPAddr).Port))
			e.registry.Load(e.cfg)
			c := dialBench(b, e, via, ln)
			buf := make([]byte, benchChunk)
			b.SetBytes(benchChunk)
			b.ResetTimer()
			for b.Loop() {
				if err := move(c, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			c.Close()
		})
	}
}

// dialBench opens a raw connection to ln, directly or through the proxy,
// and sends a real ClientHello first.
func dialBench(b *testing.B, e *env, via string, ln *net.TCPListener) net.Conn {
	hello := buildHello(helloSpec{names: []string{"api.allowed.example"}})
	port := itoa(uint16(ln.Addr().(*net.TCPAddr).Port))
	if via == "direct" {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		c.Write(hello)
		readServerHello(b, c)
		return c
	}
	c, br, resp := e.rawConnect("CONNECT api.allowed.example:" + port + " HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 200 || br.Buffered() != 0 {
		b.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	c.SetDeadline(timeZero)
	c.Write(hello)
	readServerHello(b, br)
	return c
}

// benchServerHello is the raw origin's answer to the ClientHello: a
// handshake record holding a ServerHello that is not a retry request.
var benchServerHello = []byte{recordTypeHandshake, 3, 3, 0, 4, handshakeTypeServerHello, 0, 0, 0}

func readServerHello(b *testing.B, r io.Reader) {
	if _, err := io.ReadFull(r, make([]byte, len(benchServerHello))); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkConnectTLSHandshake measures a new connection and TLS handshake,
// directly and through egressd (CONNECT, decision, cached DNS, dial, SNI
// check, audit line), at concurrency 1.
func BenchmarkConnectTLSHandshake(b *testing.B) {
	for _, via := range []string{"direct", "egressd"} {
		b.Run(via, func(b *testing.B) {
			e := newEnv(b, withConfig(func(c *policy.Config) { c.Limits.ConnectionsPerSecond, c.Limits.Burst = 1e9, 1<<30 }))
			e.resolveToOrigin("api.allowed.example")
			cfg := &tls.Config{ServerName: "api.allowed.example", RootCAs: e.ca.Pool, ClientSessionCache: nil}
			target := "api.allowed.example:" + itoa(e.origin.Addr.Port())
			b.ResetTimer()
			for b.Loop() {
				var c net.Conn
				if via == "direct" {
					var err error
					if c, err = net.Dial("tcp", e.origin.Addr.String()); err != nil {
						b.Fatal(err)
					}
				} else {
					c = e.pipelined(target)
				}
				tc := tls.Client(c, cfg)
				if err := tc.Handshake(); err != nil {
					b.Fatal(err)
				}
				tc.Close()
			}
		})
	}
}

var timeZero = time.Time{}
