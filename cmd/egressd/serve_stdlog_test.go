package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/proxy/proxytest"
)

// pastFramingOrigin is an HTTP/1.1 origin that writes past its answer's
// framing, echoing the Authorization it received: a body on HEAD (the
// naive "do_HEAD = do_GET") and a Content-Length shorter than the body.
// closed receives one value per connection once egressd has closed it
// (after reading, and rejecting, the bytes it did not ask for).
type pastFramingOrigin struct {
	port   string
	closed chan struct{}
}

func startPastFramingOrigin(t *testing.T, ca *proxytest.CA) *pastFramingOrigin {
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &pastFramingOrigin{closed: make(chan struct{}, 8)}
	_, o.port, _ = net.SplitHostPort(ln.Addr().String())
	srv := &http.Server{
		ErrorLog:  log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, "api.bound.example")}, NextProtos: []string{"http/1.1"}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, bw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer c.Close()
			echo := "you sent Authorization: " + r.Header.Get("Authorization") + "\n"
			if r.Method == http.MethodHead {
				fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(echo), echo)
			} else {
				fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n%s", echo)
			}
			bw.Flush()
			io.Copy(io.Discard, bufio.NewReader(c)) // until egressd closes it
			o.closed <- struct{}{}
		}),
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return o
}

// TestServeOriginWritingPastItsAnswerDoesNotPutTheValueOnStderr: net/http's
// Transport inside egressd logged the bytes an origin sent past its answer
// ("Unsolicited response received on idle HTTP channel starting with
// %q") through the standard logger, verbatim: the substituted
// Authorization header, real value and all, on egressd's stderr.
func TestServeOriginWritingPastItsAnswerDoesNotPutTheValueOnStderr(t *testing.T) {
	skipUntilBrokerBuilt(t)
	s := newBrokeredServeSetup(t)
	ca := proxytest.NewCA(t)
	o := startPastFramingOrigin(t, ca)
	os.WriteFile(s.originCA, ca.PEM(), 0o644)
	s.rec.port = o.port // the config allows, and the client asks for, this origin's port
	sp := startServeProcess(t, s.config(t, nil))
	caPEM, err := os.ReadFile(s.caCert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	for _, method := range []string{http.MethodHead, http.MethodGet} {
		tr := &http.Transport{
			Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: sp.listen}),
			TLSClientConfig: &tls.Config{RootCAs: pool},
		}
		req, _ := http.NewRequest(method, "https://api.bound.example:"+o.port+"/echo", nil)
		req.Header.Set("Authorization", "Bearer "+configPlaceholder)
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatalf("%s: %v\n%s", method, err, sp.stderr.String())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), brokeredValue) {
			t.Fatalf("%s: the program received the value: %q", method, body)
		}
		select {
		case <-o.closed: // egressd read the extra bytes (and would have logged them) and closed
		case <-time.After(30 * time.Second): // a failsafe, not a measure
			t.Fatalf("%s: egressd never closed the origin's connection", method)
		}
		tr.CloseIdleConnections()
	}
	sp.stop(t)
	if strings.Contains(sp.stderr.String(), brokeredValue) {
		t.Fatalf("egressd's stderr holds the real value:\n%s", sp.stderr.String())
	}
}
