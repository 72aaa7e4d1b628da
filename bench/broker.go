package main

// The brokered row (issue 15): what terminating TLS and substituting a
// secret costs per request, beside a spliced tunnel to the same HTTPS
// origin. Both run the same proxy code in a child process (this binary,
// re-executed with brokerChildEnv set) so only the proxy's CPU is counted;
// the client sends keep-alive requests over a few connections.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy"
	"github.com/egressd/egressd/proxy/broker"
)

// brokerChildEnv, when set, makes this binary the proxy of the brokered
// row: its value is the JSON of a brokerChildArgs.
const brokerChildEnv = "EGRESSD_BENCH_BROKER_CHILD"

const (
	benchPlaceholder = "egressd-ph-BenchPlaceholder0123456789ab"
	benchSecret      = "sk-bench-real-secret-value-0123456789"
	brokerConns      = 4
)

type brokerChildArgs struct {
	Listen, DNS, Work, OriginCAPEM string
	OriginPort                     uint16
	Bind                           bool // bind the secret to the origin's host: brokered, else spliced
}

// brokerRow is the markdown for the brokered and spliced rows.
type brokerRow struct {
	mode            string
	reqPerSec       float64
	cpuPerReq       time.Duration
	requests, conns int
}

// measureBroker runs both modes against one HTTPS origin and returns the
// markdown section for them.
func measureBroker(l *lab, work string, quick bool) (string, error) {
	n := 20000
	if quick {
		n = 2000
	}
	origin, err := startHTTPSOrigin(l)
	if err != nil {
		return "", err
	}
	defer origin.Close()
	var rows []brokerRow
	for _, bind := range []bool{false, true} {
		r, err := brokerRun(l, work, port(origin.Addr()), bind, n)
		if err != nil {
			return "", err
		}
		rows = append(rows, r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Credential brokering (HTTPS requests over keep-alive, %d connections)\n\n", brokerConns)
	b.WriteString("| tunnel | requests/s | proxy CPU per request |\n|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %.0f | %.1f µs |\n", r.mode, r.reqPerSec, float64(r.cpuPerReq)/1e3)
	}
	b.WriteString("\nSpliced: egressd relays the TLS bytes; brokered: egressd terminates the client's TLS, checks each request, substitutes the secret, and re-encrypts to the origin it verified.\n")
	return b.String(), nil
}

func startHTTPSOrigin(l *lab) (net.Listener, error) {
	ln, err := tls.Listen("tcp", "127.0.0.2:0", &tls.Config{Certificates: []tls.Certificate{l.ca.Leaf(testingTB{}, originHost)}})
	if err != nil {
		return nil, err
	}
	srv := &http.Server{ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})}
	go srv.Serve(ln)
	return ln, nil
}

func brokerRun(l *lab, work string, originPort uint16, bind bool, n int) (brokerRow, error) {
	mode := map[bool]string{false: "spliced", true: "brokered"}[bind]
	args := brokerChildArgs{Listen: freeAddr(), DNS: l.dnsAddr, Work: filepath.Join(work, "broker-"+mode), OriginPort: originPort, Bind: bind,
		OriginCAPEM: string(pemCert(l.ca.Cert.Raw))}
	os.MkdirAll(args.Work, 0o755)
	js, _ := json.Marshal(args)
	self, err := os.Executable()
	if err != nil {
		return brokerRow{}, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), brokerChildEnv+"="+string(js))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return brokerRow{}, err
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	if err := waitListening(args.Listen); err != nil {
		return brokerRow{}, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(l.ca.Cert)
	if bind {
		caPEM, err := os.ReadFile(filepath.Join(args.Work, "broker-ca.pem"))
		if err != nil {
			return brokerRow{}, err
		}
		pool.AppendCertsFromPEM(caPEM)
	}
	tr := &http.Transport{
		Proxy:               http.ProxyURL(&url.URL{Scheme: "http", Host: args.Listen}),
		TLSClientConfig:     &tls.Config{RootCAs: pool},
		MaxIdleConnsPerHost: brokerConns,
		MaxConnsPerHost:     brokerConns,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	target := fmt.Sprintf("https://%s:%d/v1/items", originHost, originPort)
	get := func() error {
		req, _ := http.NewRequest("GET", target, nil)
		req.Header.Set("Authorization", "Bearer "+benchPlaceholder)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: status %d", mode, resp.StatusCode)
		}
		return nil
	}
	for i := 0; i < brokerConns*2; i++ { // warm-up: connections, leaf, caches
		if err := get(); err != nil {
			return brokerRow{}, err
		}
	}
	cpu0 := cpuTime(cmd.Process.Pid)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, brokerConns)
	for w := 0; w < brokerConns; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/brokerConns; i++ {
				if err := get(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime(cmd.Process.Pid) - cpu0
	close(errs)
	if err := <-errs; err != nil {
		return brokerRow{}, err
	}
	return brokerRow{mode: mode, reqPerSec: float64(n) / elapsed.Seconds(), cpuPerReq: cpu / time.Duration(n), requests: n, conns: brokerConns}, nil
}

// runBrokerChild is the proxy of the brokered row, when this binary was
// started with brokerChildEnv. It reports whether it was.
func runBrokerChild() bool {
	js := os.Getenv(brokerChildEnv)
	if js == "" {
		return false
	}
	if err := brokerChild(js); err != nil {
		fmt.Fprintln(os.Stderr, "bench broker child:", err)
		os.Exit(1)
	}
	return true
}

func brokerChild(js string) error {
	var a brokerChildArgs
	if err := json.Unmarshal([]byte(js), &a); err != nil {
		return err
	}
	dir := filepath.Join(a.Work, "manifest")
	os.MkdirAll(dir, 0o755)
	doc := `{"schemaVersion":1,"id":"com.egressd.bench","version":"1.0.0","runtime":{"kind":"local-mcp","command":"node"},
	"permissions":[{"kind":"network","domains":["` + originHost + `"]}]}`
	if err := os.WriteFile(filepath.Join(dir, "voiceos.integration.json"), []byte(doc), 0o644); err != nil {
		return err
	}
	cfg := policy.DefaultConfig()
	cfg.Limits.ConnectionsPerSecond, cfg.Limits.Burst, cfg.Limits.MaxTunnels, cfg.Limits.MaxHandshakes = 1000000, 1000000, 100000, 100000
	cfg.Limits.RequestsPerSecond, cfg.Limits.RequestBurst = 1000000, 1000000
	cfg.Limits.MaxBrokeredConnections = cfg.Limits.MaxTunnels // the bench measures throughput, not the cap
	cfg.Integrations = []policy.Integration{{Manifest: dir, Listen: a.Listen, Exemptions: policy.Exemptions{
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}, AllowPorts: []uint16{a.OriginPort}}}}
	reg := policy.NewRegistry(policy.InMemory(), nil)
	if outs := reg.Load(cfg); outs[0].Result != policy.Loaded {
		return fmt.Errorf("load: %+v", outs)
	}
	ca, err := broker.NewEphemeralCA(24 * time.Hour)
	if err != nil {
		return err
	}
	if a.Bind {
		bindBenchSecret(reg, cfg, dir)
	}
	if err := os.WriteFile(filepath.Join(a.Work, "broker-ca.pem"), ca.CertPEM(), 0o644); err != nil {
		return err
	}
	f, err := audit.OpenFile(filepath.Join(a.Work, "audit.log"), 0)
	if err != nil {
		return err
	}
	alog, err := audit.New(f, audit.Options{})
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(a.OriginCAPEM))
	srv := proxy.New(proxy.Options{
		Key: dir, Registry: reg, Resolver: proxy.NewResolver([]string{a.DNS}, 2*time.Second), Audit: alog,
		Limits: cfg.Limits, Timeouts: cfg.Timeouts, OnAuditFailure: cfg.Audit.OnFailure,
		Broker: &proxy.BrokerOptions{CA: ca, UpstreamRoots: roots},
	})
	ln, err := net.Listen("tcp", a.Listen)
	if err != nil {
		return err
	}
	go srv.Serve(ln)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	srv.Shutdown(ctx)
	return alog.Close()
}

// bindBenchSecret binds the bench secret to the origin's host in the
// loaded policy, as a config's secrets binding would, before anything is
// served.
func bindBenchSecret(reg *policy.Registry, cfg policy.Config, key string) {
	e, _, _ := allowlist.ParseEntry(originHost)
	snap := reg.Snapshot()
	old := snap.Policies[key]
	p := policy.NewPolicy(old.Manifest, old.Entries(), policy.PolicyOptions{
		Exemptions: cfg.Integrations[0].Exemptions, Deny: cfg.Deny, NAT64: cfg.NAT64, Host: reg.HostAddrs(),
		Secrets: []policy.Secret{{Name: "BENCH_KEY", Hosts: []allowlist.Entry{e}, Placeholder: benchPlaceholder, Value: []byte(benchSecret)}},
	})
	p.ManifestAt, p.Generation = old.ManifestAt, old.Generation
	snap.Policies[key] = p
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// runBrokerOnly measures and prints the brokering rows alone (go run
// ./bench --broker), for when the whole bench is not wanted.
func runBrokerOnly(quick bool) int {
	work, err := os.MkdirTemp("", "egressd-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer os.RemoveAll(work)
	l, err := newLab(work)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	defer l.close()
	rows, err := measureBroker(l, work, quick)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	fmt.Print(rows)
	return 0
}
