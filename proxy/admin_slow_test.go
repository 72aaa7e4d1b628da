package proxy

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestSlowReadersOfMetricsCannotLockOutTheProbe: a connection whose
// request was read is not evictable while its handler writes. 32 clients
// that ask for a large /metrics and then read nothing (a receive buffer
// of one byte) held every admin slot for the write timeout, and /readyz
// was refused at accept. When every slot is serving, a new connection now
// evicts the one that has been serving longest.
func TestSlowReadersOfMetricsCannotLockOutTheProbe(t *testing.T) {
	reg := NewPromRegistry()
	big := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "egressd_test_padding", Help: "padding"}, []string{"n"})
	reg.MustRegister(big)
	for i := 0; i < 64; i++ { // 2 MiB of /metrics, more than the socket buffers hold
		big.WithLabelValues(strings.Repeat("x", 32<<10) + strconv.Itoa(i)).Set(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	serving := make(chan struct{}, 4*adminMaxConns)
	h := AdminHandler(func() (bool, string) { return true, "ready" }, reg)
	go serveAdmin(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			serving <- struct{}{}
		}
		h.ServeHTTP(w, r)
	}), nil)

	for i := 0; i < adminMaxConns; i++ {
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1) })
			return nil
		}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n")
		select {
		case <-serving:
		case <-time.After(30 * time.Second): // a failsafe, not a measure
			t.Fatalf("slow reader %d never served", i)
		}
	}
	start := time.Now()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + ln.Addr().String() + "/readyz")
	t.Logf("/readyz behind %d slow readers answered in %v", adminMaxConns, time.Since(start))
	if err != nil {
		t.Fatalf("/readyz behind %d slow readers: %v", adminMaxConns, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "ready" {
		t.Fatalf("/readyz: %d %q", resp.StatusCode, body)
	}
}
