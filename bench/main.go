// Command bench puts egressd beside its peers in one run, on loopback:
// direct (no proxy), egressd, a goproxy CONNECT proxy that accepts
// everything (the library floor), squid and tinyproxy, each with the same
// one-host allowlist. Every figure is a median of interleaved rounds and is
// reported as a ratio to direct and to the best peer, because this is a
// noisy two-core machine and only ratios measured together hold.
//
//	go run ./bench            # full run, writes bench/RESULTS.md
//	go run ./bench --quick    # under a minute, for regressions
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

func main() {
	if runBrokerChild() { // the proxy process of the brokered row (broker.go)
		return
	}
	quick := flag.Bool("quick", false, "small sizes and one round, for spotting regressions")
	brokerOnly := flag.Bool("broker", false, "run only the credential brokering rows (broker.go) and print them")
	out := flag.String("out", "bench/RESULTS.md", "where to write the markdown table")
	only := flag.String("peers", "", "comma-separated peer names to run (default: all available)")
	flag.Parse()
	if *brokerOnly {
		os.Exit(runBrokerOnly(*quick))
	}
	if err := run(*quick, *out, *only); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// sizes holds how much each figure measures.
type sizes struct {
	rounds, handshakes, connsPerSec, idleTunnels int
	bulk                                         int64
}

func run(quick bool, out, only string) error {
	sz := sizes{rounds: 3, handshakes: 1000, connsPerSec: 2000, idleTunnels: 2000, bulk: 1 << 30}
	if quick {
		sz = sizes{rounds: 1, handshakes: 100, connsPerSec: 300, idleTunnels: 300, bulk: 128 << 20}
	}
	work, err := os.MkdirTemp("", "egressd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	os.Chmod(work, 0o755) // squid and tinyproxy drop to their own users and must read their files
	lab, err := newLab(work)
	if err != nil {
		return err
	}
	defer lab.close()
	peers := availablePeers(lab, work, only)
	results := map[string]*peerResult{}
	for _, p := range peers {
		results[p.name] = &peerResult{}
	}
	start := time.Now()
	for round := 0; round < sz.rounds; round++ {
		for _, p := range peers { // interleaved: every peer once per round
			fmt.Fprintf(os.Stderr, "round %d: %s\n", round+1, p.name)
			if err := measure(lab, p, sz, results[p.name]); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
		}
	}
	auditCost, err := measureAuditCost(lab, work, sz)
	if err != nil {
		return err
	}
	brokerRows, err := measureBroker(lab, work, quick)
	if err != nil {
		return err
	}
	table := render(peers, results, sz, auditCost, quick, time.Since(start)) + brokerRows
	fmt.Print(table)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(out, []byte(table), 0o644)
}

func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "model name") {
				model = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores, %s/%s, %s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}
