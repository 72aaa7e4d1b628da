package broker

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestUpstreamConnectionsAnOriginClosesAreNotKeptForTheClientsLife: an
// origin answering "Connection: close" makes the transport dial again for
// every request; each closed connection must leave the broker's set, or a
// long-lived client connection grows egressd by one entry (~13 KiB) per
// request.
func TestUpstreamConnectionsAnOriginClosesAreNotKeptForTheClientsLife(t *testing.T) {
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, "ok")
	}))
	origin.EnableHTTP2 = false
	origin.StartTLS()
	defer origin.Close()
	roots := origin.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", origin.Listener.Addr().String())
	}
	b := &broker{
		c:     &Conn{Host: "example.com", Roots: roots, Redial: dial, HandshakeTimeout: 10 * time.Second},
		conns: map[net.Conn]bool{}, slots: make(chan struct{}, maxUpstreamConns),
	}
	tr := &http.Transport{DialTLSContext: b.dialer("http/1.1"), MaxConnsPerHost: maxUpstreamConns}
	defer tr.CloseIdleConnections()
	const n = 50
	for range n {
		resp, err := tr.RoundTrip(httptestRequest(t, origin.URL))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// Every slot free means every connection closed (a slot is given back
	// on close, after the connection left the set).
	for range maxUpstreamConns {
		b.slots <- struct{}{}
	}
	b.mu.Lock()
	tracked := len(b.conns)
	b.mu.Unlock()
	if tracked != 0 {
		t.Fatalf("%d closed upstream connections still tracked after %d requests answered with Connection: close", tracked, n)
	}
	b.closeUpstreams()
}

func httptestRequest(t *testing.T, url string) *http.Request {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
