package proxy

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy/broker"
	"github.com/egressd/egressd/proxy/proxytest"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Windows is what an HTTP/2 origin was told it may send egressd ahead of
// egressd's reading: per stream and per connection.
type h2Windows struct {
	stream, conn uint32
	err          error
}

// startWindowOrigin is an HTTP/2 origin that reads the client's preface,
// SETTINGS and connection WINDOW_UPDATE as they come on the wire, answers
// the first request 200 with no body, and reports the windows on the
// channel.
func startWindowOrigin(t *testing.T) (port uint16, roots *proxytest.CA, got <-chan h2Windows) {
	ca := proxytest.NewCA(t)
	ln, err := tls.Listen("tcp", "127.0.0.2:0", &tls.Config{
		Certificates: []tls.Certificate{ca.Leaf(t, "api.allowed.example")},
		NextProtos:   []string{"h2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	out := make(chan h2Windows, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			out <- h2Windows{err: err}
			return
		}
		defer c.Close()
		out <- readWindows(c)
		io.Copy(io.Discard, c) // until egressd closes it
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port), ca, out
}

// readWindows speaks just enough HTTP/2 server to learn the windows and
// answer the request.
func readWindows(c net.Conn) h2Windows {
	w := h2Windows{stream: 65535, conn: 65535} // the protocol's initial windows
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return h2Windows{err: fmt.Errorf("no client preface: %q %v", preface, err)}
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		return h2Windows{err: err}
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return h2Windows{err: err}
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
				w.stream = v
			}
			fr.WriteSettingsAck()
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				w.conn += f.Increment
			}
		case *http2.HeadersFrame:
			var block bytes.Buffer
			hpack.NewEncoder(&block).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
			return w
		}
	}
}

// TestBrokerZeroWindowClientCannotHaveAnH2OriginParkMegabytesInEgressd: a
// client that never reads (a zero window) on 8 streams had each h2 origin
// stream fill Go's default 4 MiB receive window in egressd (32 MiB a
// connection). The window egressd grants an origin is what it holds for
// such a client: at most 256 KiB a stream and 1 MiB (and the protocol's initial 64 KiB)
// a connection, read
// from egressd's own SETTINGS and WINDOW_UPDATE on the wire.
func TestBrokerZeroWindowClientCannotHaveAnH2OriginParkMegabytesInEgressd(t *testing.T) {
	port, ca, got := startWindowOrigin(t)
	b := newBrokerEnvWith(t, mustEphemeralCA(t), ca.Pool, false, nil, withConfig(func(c *policy.Config) {
		c.Integrations[0].Exemptions.AllowPorts = append(c.Integrations[0].Exemptions.AllowPorts, port)
	}))
	req, err := http.NewRequest("GET", "https://"+net.JoinHostPort("api.allowed.example", itoa(port))+"/big", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenPH)
	resp, body := do(t, b.client(true), req)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d body %q", resp.StatusCode, body)
	}
	w := <-got
	if w.err != nil {
		t.Fatal(w.err)
	}
	// Go's transport adds its 1 MiB to the connection's initial 65535.
	if w.stream > 256<<10 || w.conn > 1<<20+65535 {
		t.Fatalf("egressd lets an h2 origin send %d bytes a stream and %d a connection ahead of a client that does not read; want at most 256 KiB and 1 MiB (+64 KiB)", w.stream, w.conn)
	}
}

func mustEphemeralCA(t *testing.T) *broker.CA {
	bca, err := broker.NewEphemeralCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return bca
}
