package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/policy"
)

// brokeredConns is how many brokered connections BenchmarkBrokeredConnectionMemory
// holds open at once.
const brokeredConns = 64

// BenchmarkBrokeredConnectionMemory opens brokeredConns connections to a
// bound host, each from a real net/http client of its own (HTTP/1.1, or
// HTTP/2 end to end), sends one request on each and keeps them alive; then
// it reports what egressd holds per connection (heap and goroutine stacks
// after a collection, runtime.MemStats, and the process's RSS). The
// clients' and the origin's own TLS state is measured with the same
// number of direct connections from the same clients and left out, so the
// figure is egressd's: the client-facing TLS server, the origin-facing TLS
// client, and the HTTP/1.1 or HTTP/2 state of both sides. It is the cost
// of an idle connection after a request; an origin may add up to its
// HTTP/2 windows (TestBrokerZeroWindowClientCannotHaveAnH2OriginParkMegabytesInEgressd).
//
//	go test -run XXX -bench BenchmarkBrokeredConnectionMemory -benchtime=3x ./proxy/
func BenchmarkBrokeredConnectionMemory(b *testing.B) {
	for _, proto := range []string{"h1", "h2"} {
		b.Run(proto, func(b *testing.B) {
			lab := newBrokeredLab(b, proto == "h2")
			var sum brokeredCost
			for b.Loop() {
				m := lab.measure(brokeredConns)
				sum.heap += m.heap
				sum.rss += m.rss
				sum.goroutines += m.goroutines
			}
			n := float64(b.N)
			b.ReportMetric(sum.heap/n, "B/conn")
			b.ReportMetric(sum.rss/n, "rss-B/conn")
			b.ReportMetric(sum.goroutines/n, "goroutines/conn")
		})
	}
}

// TestABrokeredConnectionHoldsUnderItsDocumentedCost keeps the figure the
// README gives beside limits.max_brokered_connections honest: an idle
// brokered connection, HTTP/1.1 or HTTP/2, holds under maxBrokeredConnBytes
// of egressd's heap and stacks.
func TestABrokeredConnectionHoldsUnderItsDocumentedCost(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector grows frames and moves values to the heap: the bound is for the build that ships")
	}
	for _, h2 := range []bool{false, true} {
		if got := newBrokeredLab(t, h2).measure(16); got.heap > maxBrokeredConnBytes {
			t.Errorf("HTTP/2 %v: an idle brokered connection holds %.0f B of egressd's heap and stacks, over %d", h2, got.heap, maxBrokeredConnBytes)
		}
	}
}

// maxBrokeredConnBytes bounds what an idle brokered connection holds
// (measured: see README "Limits and timeouts").
const maxBrokeredConnBytes = 256 << 10

// brokeredLab is a broker env with its limits out of the way, and the
// means to open connections to its origin through egressd or directly.
type brokeredLab struct {
	tb        testing.TB
	b         *brokerEnv
	h2        bool
	responses int // response lines already counted
}

func newBrokeredLab(tb testing.TB, h2 bool) *brokeredLab {
	b := newBrokerEnv(tb, h2, nil, withConfig(func(c *policy.Config) {
		c.Limits.ConnectionsPerSecond, c.Limits.Burst = 1e9, 1<<30
		c.Limits.RequestsPerSecond, c.Limits.RequestBurst = 1e9, 1<<30
		c.Limits.MaxHandshakes = 4 * brokeredConns
		c.Limits.MaxTunnels, c.Limits.MaxBrokeredConnections = 4*brokeredConns, 4*brokeredConns
	}))
	return &brokeredLab{tb: tb, b: b, h2: h2}
}

// brokeredCost is egressd's cost per connection: heap and stacks in use
// after a collection and resident memory, in bytes, and goroutines. The
// RSS figure is noisy: it counts pages the collector freed but the
// runtime has not returned, so one reading can even come out negative.
type brokeredCost struct{ heap, rss, goroutines float64 }

// transport is a client that holds one connection: through egressd
// (trusting its broker CA), or straight to the origin (trusting the
// origin's CA).
func (l *brokeredLab) transport(viaEgressd bool) *http.Transport {
	pool := x509.NewCertPool()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: l.h2, MaxConnsPerHost: 1}
	if viaEgressd {
		pool.AppendCertsFromPEM(l.b.bca.CertPEM())
		tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: l.b.addr})
		return tr
	}
	pool.AddCert(l.b.origin.ca.Cert)
	origin := l.b.origin.addr.String()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, origin)
	}
	return tr
}

// open opens n connections, each with one request answered, and returns
// their transports.
func (l *brokeredLab) open(n int, viaEgressd bool) []*http.Transport {
	trs := make([]*http.Transport, 0, n)
	for range n {
		tr := l.transport(viaEgressd)
		req := l.b.credentialRequest(l.tb, "api.allowed.example")
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: tr}).Do(req)
		if err != nil {
			l.tb.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) // to the end, or HTTP/1.1 closes the connection
		resp.Body.Close()
		if resp.StatusCode != 200 || (resp.ProtoMajor == 2) != l.h2 {
			l.tb.Fatalf("request: %d over %s", resp.StatusCode, resp.Proto)
		}
		trs = append(trs, tr)
	}
	return trs
}

// measure opens n connections directly and then n through egressd, and
// returns what those through egressd cost beyond the direct ones. Each
// reading is taken with every connection open and idle.
func (l *brokeredLab) measure(n int) brokeredCost {
	cost := func(viaEgressd bool) (heap, rss, goroutines int) {
		closes := l.closeLines()
		mem0, g0 := memoryInUse()
		rss0 := residentBytes(l.tb)
		trs := l.open(n, viaEgressd)
		l.quiet(viaEgressd, n)
		mem, g := memoryInUse()
		rss = residentBytes(l.tb) - rss0
		for _, tr := range trs {
			tr.CloseIdleConnections()
		}
		if viaEgressd {
			l.waitCloseLines(closes + n)
		}
		return mem.heap + mem.stacks - mem0.heap - mem0.stacks, rss, g - g0
	}
	directHeap, directRSS, directG := cost(false)
	heap, rss, g := cost(true)
	per := func(via, direct int) float64 { return float64(via-direct) / float64(n) }
	return brokeredCost{heap: per(heap, directHeap), rss: per(rss, directRSS), goroutines: per(g, directG)}
}

// quiet waits until every brokered connection's request has its response
// line, the last thing egressd writes for it, so the reading finds the
// connections idle.
func (l *brokeredLab) quiet(viaEgressd bool, n int) {
	if !viaEgressd {
		return
	}
	for {
		got := 0
		for _, e := range l.b.log.events(l.tb) {
			if e["event"] == "response" {
				got++
			}
		}
		if got >= l.responses+n {
			l.responses = got
			return
		}
		<-l.b.log.wrote
	}
}

func (l *brokeredLab) closeLines() int {
	got := 0
	for _, e := range l.b.log.events(l.tb) {
		if e["event"] == "close" {
			got++
		}
	}
	return got
}

func (l *brokeredLab) waitCloseLines(want int) {
	for l.closeLines() < want {
		<-l.b.log.wrote
	}
}

// residentBytes is the process's resident set (/proc/self/statm).
func residentBytes(tb testing.TB) int {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(raw))
	pages, err := strconv.Atoi(f[1])
	if err != nil {
		tb.Fatal(err)
	}
	return pages * os.Getpagesize()
}
