package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
)

// TestRequestWhoseRecordFailsIsNotSentOnARetriedConnection: the record of
// a request on a reused upstream connection cannot be written, so that
// connection is closed before the request is written; Go's transport then
// retries a replayable request on a fresh connection (nothing was
// written). The retry must not carry the request out unrecorded.
func TestRequestWhoseRecordFailsIsNotSentOnARetriedConnection(t *testing.T) {
	var got atomic.Int32
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		io.WriteString(w, "ok")
	}))
	origin.EnableHTTP2 = false
	origin.StartTLS()
	defer origin.Close()
	dial := func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", origin.Listener.Addr().String())
	}
	first, err := dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := NewEphemeralCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Leaf("example.com", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var records atomic.Int32
	c := &Conn{
		Host: "example.com", Port: 443, Leaf: leaf,
		Roots:    origin.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs,
		Upstream: first, Redial: dial,
		Record: func(r Request) error {
			if r.Status == 0 && r.Reason == "" && records.Add(1) > 1 {
				return errors.New("audit log unwritable")
			}
			return nil
		},
		Outcome:          func(Request) {},
		Sentence:         func(r policy.Reason) string { return string(r) },
		HandshakeTimeout: 10 * time.Second, HeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, WaitTimeout: 10 * time.Second,
	}
	client, server := net.Pipe()
	done := make(chan struct{})
	go func() { defer close(done); Serve(context.Background(), server, c) }()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	tr := &http.Transport{DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		tc := tls.Client(client, &tls.Config{ServerName: "example.com", RootCAs: pool, NextProtos: []string{"http/1.1"}})
		return tc, tc.HandshakeContext(ctx)
	}, MaxConnsPerHost: 1}
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for i, want := range []int{200, 503} {
		resp, err := hc.Get("https://example.com/v1/items")
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || want == 503 && resp.Header.Get(ReasonHeader) != string(policy.AuditUnavailable) {
			t.Fatalf("request %d: %d %q, want %d", i+1, resp.StatusCode, resp.Header.Get(ReasonHeader), want)
		}
	}
	if n := got.Load(); n != 1 {
		t.Fatalf("the origin received %d requests, want 1: the second's record failed", n)
	}
	tr.CloseIdleConnections()
	client.Close()
	<-done
}
