package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/internal/workdir"
	"github.com/egressd/egressd/sandbox/selftest"
)

// runSelftest is "egressd selftest": a real sandbox, started by the same
// code as "egressd run", runs the escape battery (sandbox/selftest) with
// this binary as its program. Exit 0 only when nothing is open.
func runSelftest(args []string, stdout, stderr io.Writer) int {
	var f runFlags
	var asJSON bool
	fs := newFlagSet("selftest", "usage: egressd selftest [--json] [--config FILE] [--mode enforce|audit] [--manifest PATH] [--insecure-env-only]\n\n"+
		"Runs the escape battery inside a real sandbox, started exactly as egressd run starts one, and prints\n"+
		"what each layer stopped. Exit status 0: nothing is open; 1: something is; 2: usage.", stderr)
	fs.StringVar(&f.manifest, "manifest", "", "run the battery under this integration's manifest (default: a built-in probe integration)")
	fs.StringVar(&f.config, "config", "", "operator config, as for egressd run")
	fs.StringVar(&f.mode, "mode", "", "enforce or audit")
	fs.BoolVar(&f.insecureEnvOnly, "insecure-env-only", false, "no sandbox, as egressd run --insecure-env-only: shows what that mode leaves open")
	fs.BoolVar(&asJSON, "json", false, "print JSON for CI and review records")
	if err := parseFlags(fs, args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	report, err := selftestRun(f, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "egressd selftest:", err)
		return exitFail
	}
	if asJSON {
		selftest.WriteJSON(stdout, report)
	} else {
		selftest.WriteTable(stdout, report)
	}
	if report.AnyOpen() {
		return exitFail
	}
	return exitOK
}

// selftestRun lays out a throwaway folder, starts the beacons, and runs the
// battery through prepareRun and sandboxed (or envOnly), as egressd run.
func selftestRun(f runFlags, stderr io.Writer) (selftest.Report, error) {
	var report selftest.Report
	dir, err := os.MkdirTemp("", "egressd-selftest-")
	if err != nil {
		return report, err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755) // the sandbox's own user must reach the integration folder
	// The host's own resolvers, as the host has them (the sandbox sees a
	// generated resolv.conf): the raw-resolver probe tries to reach them.
	hostDNS, _ := systemResolvers()
	targets := selftest.DefaultTargets()
	t, h, beaconResolver, hooked := selftest.TestTargets()
	if hooked {
		targets, hostDNS = t, h
	}
	b, err := selftest.StartBeacons(dir, targets, hostDNS)
	if err != nil {
		return report, err
	}
	defer b.Close()
	if beaconResolver {
		b.Config.Resolver = b.DNSAddr
	}
	// The terminal probe attacks a terminal of egressd's own, never the
	// user's: a fresh pty is standard input while the battery runs.
	if err := b.LendTerminal(); err != nil {
		fmt.Fprintln(stderr, "egressd selftest: no terminal to lend; the terminal probe is skipped:", err)
	}
	self, err := os.Executable()
	if err != nil {
		return report, err
	}
	command := []string{self, selftest.ProbeArg, "{}"}
	if f.manifest == "" {
		if f.manifest, command[0], err = selftest.WriteIntegration(dir, self); err != nil {
			return report, err
		}
	}
	f.state, f.auditLog = filepath.Join(dir, "state"), b.Config.AuditLog
	f.resolvers = multiFlag{b.DNSAddr} // names that reach upstream are seen there
	r, err := prepareRun(f, command)
	if err != nil {
		return report, err
	}
	closed := false
	defer func() {
		if !closed {
			r.close()
		}
	}()
	c := b.Config
	c.Integr = r.spec.Dir
	if abs, err := workdir.Abs(f.manifest); err == nil {
		c.Manifest, _ = allowlist.Locate(abs)
	}
	c.Sandboxed = !f.insecureEnvOnly
	arg, _ := json.Marshal(c)
	r.spec.Args[len(r.spec.Args)-1] = string(arg)
	report.Host = selftest.ReadHost()
	report.Host.Mode = "sandbox"
	// The program's standard output, which egressd run hands it as its
	// own, carries the results back: the only channel that does not
	// depend on where the sandbox keeps its state.
	if err := b.CaptureStdout(); err != nil {
		return report, fmt.Errorf("capture the probes' output: %w", err)
	}
	start := time.Now()
	var code int
	if f.insecureEnvOnly {
		report.Host.Mode = "insecure-env-only"
		code = r.envOnly(stderr)
	} else {
		code = r.sandboxed(stderr)
	}
	output := b.ReturnStdout()
	b.ReturnStdin()
	r.close() // the audit log is complete before it is judged
	closed = true
	report.Probes, report.Bounds = b.Judge(output, code)
	fmt.Fprintf(stderr, "egressd selftest: %d probes in %s\n", len(report.Probes), time.Since(start).Round(time.Millisecond))
	return report, nil
}
