// Command bench puts egressd beside its peers in one run, on loopback:
// direct (no proxy), egressd, a goproxy CONNECT proxy that accepts
// everything (the library floor), squid and tinyproxy, each with the same
// one-host allowlist. Every figure is a median of interleaved rounds and is
// reported as a ratio to direct and to the best peer, because this is a
// noisy two-core machine and only ratios measured together hold.
//
//	go run ./bench            # full run, writes bench/RESULTS.md
//	go run ./bench --quick    # under a minute, for regressions
//	go run ./bench --peers=egressd,relay,squid --rows=c32 --rounds=2 --out=/tmp/r.md
//	go run ./bench --syscalls --peers=egressd,relay   # system calls per connection
//
// See bench/README.md for what each figure measures and how to profile.
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
	var cfg config
	brokerOnly := flag.Bool("broker", false, "run only the credential brokering rows (broker.go) and print them")
	flag.BoolVar(&cfg.quick, "quick", false, "small sizes and one round, for spotting regressions")
	flag.StringVar(&cfg.out, "out", "bench/RESULTS.md", "where to write the markdown table")
	flag.StringVar(&cfg.peers, "peers", "", "comma-separated peer names to run (default: all available; direct always runs)")
	flag.StringVar(&cfg.groups, "rows", "", "comma-separated row groups to measure: "+strings.Join(allGroups, ",")+",broker (default: all)")
	flag.IntVar(&cfg.rounds, "rounds", 0, "interleaved rounds (default 3, --quick 1)")
	flag.IntVar(&cfg.conns, "conns", 0, "connections at c=32, over which CPU per connection is measured (default 5000, --quick 1000)")
	flag.IntVar(&cfg.handshakes, "handshakes", 0, "handshakes at c=1 (default 1000, --quick 100)")
	flag.BoolVar(&cfg.syscalls, "syscalls", false, "instead of the table, count each proxy's system calls per connection with strace -f -c over --conns connections at c=32")
	flag.IntVar(&cfg.sysConc, "syscalls-c", 32, "with --syscalls, the concurrency the connections are made at: 1 shows the wake-ups (futex, epoll_pwait) a lone connection costs, which at c=32 busy threads hide")
	flag.BoolVar(&cfg.perfStat, "perf-stat", false, "with --syscalls, count with perf stat's tracepoints instead of strace (all calls, futex, epoll_pwait, nanosleep, context switches, CPU migrations): it slows the proxy far less, so the scheduler's wake-ups read closer to what they cost")
	flag.StringVar(&cfg.straceLog, "strace-log", "", "with --syscalls, also keep every traced call (strace -f -tt -T) in PATH.PEER; use a small --conns")
	flag.StringVar(&cfg.perf, "perf", "", "with --syscalls, record a perf CPU profile of each proxy into PATH.PEER instead of counting")
	flag.StringVar(&cfg.baseline, "baseline", "", "an egressd binary built from another tree (say main), run as peer \"baseline\" in the same rounds, for a same-run A/B of a change")
	flag.Parse()
	cfg.fill()
	if *brokerOnly {
		os.Exit(runBrokerOnly(cfg.quick))
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// sizes holds how much each figure measures.
type sizes struct {
	rounds, handshakes, conns, idleTunnels int
	bulk                                   int64
}

// config is one invocation: sizes, and which peers and rows to run.
type config struct {
	sizes
	quick, syscalls bool
	sysConc         int  // --syscalls-c
	perfStat        bool // --perf-stat
	out, straceLog  string
	perf, baseline  string
	peers, groups   string // comma-separated; "" is all
}

// fill sets every size not given on the command line.
func (c *config) fill() {
	def := sizes{rounds: 3, handshakes: 1000, conns: 5000, idleTunnels: 2000, bulk: 1 << 30}
	if c.quick {
		def = sizes{rounds: 1, handshakes: 100, conns: 1000, idleTunnels: 300, bulk: 128 << 20}
	}
	for _, f := range []struct {
		v *int
		d int
	}{{&c.rounds, def.rounds}, {&c.handshakes, def.handshakes}, {&c.conns, def.conns}} {
		if *f.v <= 0 {
			*f.v = f.d
		}
	}
	c.idleTunnels, c.bulk = def.idleTunnels, def.bulk
}

// args is the command line that repeats this run, for the report.
func (c config) args() string {
	var a []string
	flag.Visit(func(f *flag.Flag) {
		if f.Name != "out" {
			a = append(a, "--"+f.Name+"="+f.Value.String())
		}
	})
	if len(a) == 0 {
		return ""
	}
	return " " + strings.Join(a, " ")
}

func run(cfg config) error {
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
	peers := availablePeers(lab, work, cfg.peers)
	if cfg.baseline != "" {
		peers = append(peers, baselinePeer(lab, work, cfg.baseline))
	}
	if cfg.syscalls {
		return countSyscalls(lab, peers, cfg)
	}
	results := map[string]samples{}
	for _, p := range peers {
		results[p.name] = samples{}
	}
	start := time.Now()
	for round := 0; round < cfg.rounds; round++ {
		for _, p := range peers { // interleaved: every peer once per round
			fmt.Fprintf(os.Stderr, "round %d: %s\n", round+1, p.name)
			if err := measure(lab, p, cfg, results[p.name]); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
		}
		if selected(cfg.groups, groupAudit) && selected(cfg.peers, "egressd") {
			fmt.Fprintf(os.Stderr, "round %d: egressd audit sinks\n", round+1)
			if results[auditPeer] == nil {
				results[auditPeer] = samples{}
			}
			if err := measureAuditCost(lab, work, cfg, results[auditPeer]); err != nil {
				return err
			}
		}
	}
	brokerRows := ""
	if selected(cfg.groups, "broker") {
		var err error
		if brokerRows, err = measureBroker(lab, work, cfg.quick); err != nil {
			return err
		}
	}
	table := render(peers, results, cfg, time.Since(start)) + brokerRows
	fmt.Print(table)
	if err := os.MkdirAll(filepath.Dir(cfg.out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(cfg.out, []byte(table), 0o644)
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
