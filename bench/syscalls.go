package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// countSyscalls prints, for each proxy, the system calls it makes per
// connection: strace -f -c attached to the running proxy (every thread)
// over cfg.conns handshakes at c=32 (--syscalls-c), after a warm-up. Counts, unlike
// times, do not move with the machine's load; strace slows the proxy, so
// no time is reported.
func countSyscalls(l *lab, peers []peer, cfg config) error {
	if _, err := exec.LookPath("strace"); err != nil {
		return fmt.Errorf("--syscalls needs strace (apt-get install strace): %w", err)
	}
	counts := map[string]map[string]float64{}
	var names []string
	for _, p := range peers {
		if p.direct() {
			continue
		}
		fmt.Fprintf(os.Stderr, "syscalls: %s\n", p.name)
		c, err := traceOne(l, p, cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		counts[p.name] = c
		names = append(names, p.name)
	}
	tool := "strace -f -c"
	if cfg.perfStat {
		tool = "perf stat (tracepoints)"
	}
	fmt.Print(syscallTable(names, counts, cfg.conns, max(cfg.sysConc, 1), tool))
	return nil
}

func traceOne(l *lab, p peer, cfg config) (map[string]float64, error) {
	addr := freeAddr()
	cmd, err := p.start(addr)
	if err != nil {
		return nil, err
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	if err := waitListening(addr); err != nil {
		return nil, err
	}
	if _, _, err := handshake(l, p, addr); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	out := filepath.Join(os.TempDir(), fmt.Sprintf("egressd-bench-strace-%d", cmd.Process.Pid))
	defer func() {
		if cfg.straceLog == "" && cfg.perf == "" {
			os.Remove(out)
		}
	}()
	args := []string{"-f", "-c", "-o", out, "-p", strconv.Itoa(cmd.Process.Pid)}
	if cfg.straceLog != "" { // every call too, with its time, for a phase-by-phase read
		out = cfg.straceLog + "." + p.name
		args = []string{"-f", "-C", "-tt", "-T", "-o", out, "-p", strconv.Itoa(cmd.Process.Pid)}
	}
	tool := "strace"
	if cfg.perfStat { // counts from tracepoints: no ptrace stop per call
		tool = "perf"
		args = []string{"stat", "-x", ",", "-o", out, "-e", perfStatEvents, "-p", strconv.Itoa(cmd.Process.Pid)}
	}
	if cfg.perf != "" { // a CPU profile instead: perf record of every thread
		tool, out = "perf", cfg.perf+"."+p.name
		args = []string{"record", "-F", "1999", "-g", "-o", out, "-p", strconv.Itoa(cmd.Process.Pid)}
	}
	st := exec.Command(tool, args...)
	if err := st.Start(); err != nil {
		return nil, err
	}
	defer func() { st.Process.Signal(syscall.SIGINT); st.Wait() }()
	if cfg.perf != "" || cfg.perfStat {
		time.Sleep(time.Second) // perf has no attach event to wait on; a profile missing its first second is still a profile
	} else if err := waitTraced(cmd.Process.Pid); err != nil {
		return nil, err
	}
	if _, _, _, err := handshakes(l, p, addr, cfg.conns, max(cfg.sysConc, 1)); err != nil {
		return nil, err
	}
	st.Process.Signal(syscall.SIGINT)
	st.Wait()
	if cfg.perf != "" {
		fmt.Fprintf(os.Stderr, "perf report -i %s --no-children --sort symbol\n", out)
		return map[string]float64{}, nil
	}
	if cfg.perfStat {
		return parsePerfStat(out)
	}
	return parseStraceSummary(out)
}

// perfStatEvents are what --perf-stat counts: every system call (the
// total), the scheduler's own, and the thread switches they stand for.
const perfStatEvents = "raw_syscalls:sys_enter,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_nanosleep,context-switches,cpu-migrations"

// parsePerfStat reads perf stat -x, output: count,unit,event,...; the
// events are named as strace's table names them where there is a name.
func parsePerfStat(path string) (map[string]float64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	names := map[string]string{
		"raw_syscalls:sys_enter":         "total",
		"syscalls:sys_enter_futex":       "futex",
		"syscalls:sys_enter_epoll_pwait": "epoll_pwait",
		"syscalls:sys_enter_nanosleep":   "nanosleep",
		"context-switches":               "context switches",
		"cpu-migrations":                 "CPU migrations",
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(data), "\n") {
		fs := strings.Split(line, ",")
		if len(fs) < 3 {
			continue
		}
		n, err := strconv.ParseFloat(fs[0], 64)
		if name, ok := names[fs[2]]; ok && err == nil {
			out[name] = n
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no perf stat counts in %s", path)
	}
	return out, nil
}

// waitTraced waits until every thread of pid has a tracer.
func waitTraced(pid int) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if allTraced(pid) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("strace did not attach to %d", pid)
}

func allTraced(pid int) bool {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if len(tasks) == 0 {
		return false
	}
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited
		}
		if !strings.Contains(string(data), "\nTracerPid:\t") || strings.Contains(string(data), "\nTracerPid:\t0\n") {
			return false
		}
	}
	return true
}

// parseStraceSummary reads strace -c's table (after the trace, with -C):
// calls are the fourth column, the name the last.
func parseStraceSummary(path string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	inTable := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "% time") {
			inTable = true
		}
		fs := strings.Fields(line)
		if !inTable || len(fs) < 5 || strings.HasPrefix(fs[0], "%") || strings.HasPrefix(fs[0], "-") {
			continue
		}
		n, err := strconv.ParseFloat(fs[3], 64)
		if err != nil {
			continue
		}
		out[fs[len(fs)-1]] = n
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no strace summary in %s", path)
	}
	return out, sc.Err()
}

// syscallTable renders calls per connection, one row per system call,
// busiest first (by the sum over peers), the total last.
func syscallTable(peers []string, counts map[string]map[string]float64, conns, conc int, tool string) string {
	sum := map[string]float64{}
	for _, c := range counts {
		for name, n := range c {
			if name != "total" {
				sum[name] += n
			}
		}
	}
	var calls []string
	for name := range sum {
		calls = append(calls, name)
	}
	sort.Slice(calls, func(i, j int) bool {
		return sum[calls[i]] > sum[calls[j]] || sum[calls[i]] == sum[calls[j]] && calls[i] < calls[j]
	})
	calls = append(calls, "total")
	var b strings.Builder
	fmt.Fprintf(&b, "System calls per connection (CONNECT + TLS 1.3 handshake + 1-byte echo + close), %s over %d connections at c=%d:\n\n| syscall |", tool, conns, conc)
	for _, p := range peers {
		fmt.Fprintf(&b, " %s |", p)
	}
	fmt.Fprintf(&b, "\n|---|%s\n", strings.Repeat("---|", len(peers)))
	for _, name := range calls {
		fmt.Fprintf(&b, "| %s |", name)
		for _, p := range peers {
			fmt.Fprintf(&b, " %.1f |", counts[p][name]/float64(conns))
		}
		b.WriteString("\n")
	}
	return b.String()
}
