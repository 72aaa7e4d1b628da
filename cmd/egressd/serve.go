package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/configs"
	"github.com/egressd/egressd/internal/termsafe"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy"
	"github.com/prometheus/client_golang/prometheus"
)

// serveFlags are "egressd serve"'s flags. Each has a config-file key; a
// flag given on the command line wins over the file.
type serveFlags struct {
	config, manifest, listen, admin, auditLog, state, mode string
	resolvers, allowPrivate, allowPorts                    multiFlag
}

type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint(*m) }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func runServe(args []string, stdout, stderr io.Writer) int {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	defer signal.Stop(sig)
	// A write to stdout or stderr whose reader went away (a log shipper
	// restarting) must fail like any other audit write, refusing with
	// audit_unavailable, not kill every integration with SIGPIPE, Go's
	// default for fds 1 and 2.
	signal.Ignore(syscall.SIGPIPE)
	return serve(context.Background(), args, stdout, stderr, sig)
}

// serve runs the daemon until SIGTERM or SIGINT arrives on sig. SIGHUP
// reloads. Tests drive it through sig.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer, sig <-chan os.Signal) int {
	var f serveFlags
	fs := newFlagSet("serve", "usage: egressd serve [--config FILE | --manifest PATH [--listen ADDR]] [flags]\n\nWith no flags, serves the embedded example integration on "+configs.DefaultListen+", auditing to stdout.", stderr)
	fs.StringVar(&f.config, "config", "", "operator config file (YAML)")
	fs.StringVar(&f.manifest, "manifest", "", "serve one integration: its manifest file or folder (the sidecar shape)")
	fs.StringVar(&f.listen, "listen", configs.DefaultListen, "with --manifest: host:port or unix:/path.sock")
	fs.StringVar(&f.admin, "admin", "", "admin endpoint address (/healthz, /readyz, /metrics); off by default")
	fs.StringVar(&f.auditLog, "audit-log", "", "audit log file, or - for stdout (config: audit.path; default -)")
	fs.StringVar(&f.state, "state", "", "version memory directory (config: state_dir)")
	fs.StringVar(&f.mode, "mode", "", "enforce or audit (config: mode)")
	fs.Var(&f.resolvers, "resolver", "upstream DNS server host:port, repeatable (config: resolvers; default /etc/resolv.conf)")
	fs.Var(&f.allowPrivate, "allow-private", "dev/test exemption: a CIDR inside the denied ranges, repeatable (config: integrations[].allow_private)")
	fs.Var(&f.allowPorts, "allow-port", "exemption: a port besides 443, repeatable (config: integrations[].allow_ports)")
	if err := parseFlags(fs, args); err != nil || fs.NArg() > 0 {
		return exitUsage
	}
	stderr = termsafe.LinesUpTo(stderr, maxJournalLine) // every message one line, escaped and bounded: nothing forges a checkpoint or a line
	if f.config != "" && f.manifest != "" {
		fmt.Fprintln(stderr, "egressd serve: give --config or --manifest, not both")
		return exitUsage
	}
	if msg := policy.ListenProblem(f.listen); f.config == "" && msg != "" {
		printLine(stderr, "egressd serve: --listen: %s", msg)
		return exitUsage
	}
	cleanup, err := f.embeddedDefault()
	if err != nil {
		fmt.Fprintln(stderr, "egressd serve:", err)
		return exitFail
	}
	defer cleanup()
	cfg, err := f.load()
	if err != nil {
		printConfigError(stderr, f.config, err)
		return exitUsage
	}
	sink, err := openAuditSink(cfg.Audit, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "egressd serve:", err)
		return exitFail
	}
	defer sink.close()
	d, admin, err := buildDaemon(ctx, cfg, f, sink, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "egressd serve:", err)
		return exitFail
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var started atomic.Bool
	watch := startWatch(func() proxy.WatchSet {
		if !started.Load() {
			return watchSet(cfg, f.config)
		}
		return watchSet(d.Config(), f.config)
	})
	hup, err := startDaemon(ctx, cancel, d, sig)
	if err != nil {
		go watch.close() // once built: a stuck walk must not hold up the exit
		if errors.Is(err, errStoppedWhileStarting) {
			if !shutdown(context.Background(), d, stderr) { // the audit chain's clean end
				return exitFail
			}
			return exitOK
		}
		d.Audit.Write(startFailed(err))
		shutdown(context.Background(), d, stderr) // listeners opened are closed, and the chain ends cleanly
		printLines(stderr, "egressd serve: "+err.Error())
		return exitFail
	}
	for key, addr := range d.Listeners() {
		if p := d.Registry.Policy(key); p != nil && p.Claim() != "" {
			printLine(stderr, "egressd: serving %s on %s as the unapproved claim of %s %s by folder %s: it waits for approval and %s (%s)",
				p.Manifest.ID, addr, p.Manifest.ID, p.Pending, p.Claim(), allowsInForce(p), p.ApproveCommand())
		} else if p != nil {
			id, _ := p.InForce()
			fmt.Fprintf(stderr, "egressd: serving %s on %s\n", id, addr)
		} else {
			printLine(stderr, "egressd: refusing every connection for %s on %s (manifest_not_loaded): its manifest is not loaded", key, addr)
		}
	}
	notify(stderr, daemon.SdNotifyReady) // systemd Type=notify: every listener is up
	if admin != nil {
		go admin.serve(d)
		defer admin.close()
	}
	started.Store(true)
	reload := reloader(ctx, d, stderr)
	go watch.run(ctx, reload, stderr)
	if hup {
		reload() // a SIGHUP that came while egressd started
	}
	roll := time.NewTicker(time.Second)
	defer roll.Stop()
	for {
		select {
		case <-roll.C:
			if err := d.Audit.RollIfFull(); err != nil {
				fmt.Fprintln(stderr, "egressd: audit rotation:", err)
			}
		case s := <-sig:
			switch s {
			case syscall.SIGHUP:
				reload()
				continue
			case syscall.SIGUSR1:
				if err := sink.reopen(d.Audit); err != nil {
					fmt.Fprintln(stderr, "egressd: audit reopen:", err)
				}
				continue
			}
			notify(stderr, daemon.SdNotifyStopping)
			if !shutdown(ctx, d, stderr) {
				return exitFail
			}
			return exitOK
		case err := <-d.Errors():
			fmt.Fprintln(stderr, "egressd serve:", err)
			shutdown(ctx, d, stderr)
			return exitFail
		}
	}
}

// shutdown stops d and reports false, having said why on stderr, when the
// audit log's end may be lost: serve then exits non-zero.
func shutdown(ctx context.Context, d *proxy.Daemon, stderr io.Writer) bool {
	if err := d.Shutdown(ctx); err != nil {
		printLines(stderr, "egressd serve: audit log: "+err.Error())
		return false
	}
	return true
}

// startFailed is the audit record of a start that failed after the audit
// log opened: the log says why serve stopped, before its clean end.
func startFailed(err error) audit.Event {
	return audit.Event{Kind: audit.Lifecycle, Action: "start_failed", Msg: err.Error()}
}

// endAuditLog ends log's chain cleanly after a start that failed: without
// its shutdown record an honest log verifies as truncated forever.
func endAuditLog(log *audit.Log, err error) {
	log.Write(startFailed(err))
	log.Write(audit.Event{Kind: audit.Lifecycle, Action: "stop"})
	log.Close()
}

// allowsInForce says what p lets through while its claim waits: nothing,
// or the entries in force.
func allowsInForce(p *policy.Policy) string {
	if entries := p.InForceEntries(); len(entries) > 0 {
		return "allows only " + strings.Join(entries, " ")
	}
	return "nothing is allowed"
}

// watchStart is the file watcher being built beside serve's start, never
// on its path: building it walks and reads paths integrations chose,
// each call bounded but a hostile one costing its deadline, and serve
// waited on it before opening any listener (and, while inotify_add_watch
// was unbounded, forever).
type watchStart struct {
	built chan watchBuilt
	early bool // built before the first load began: its fingerprint predates the load
}

type watchBuilt struct {
	w   *proxy.Watcher
	err error
}

// watchStartWait is how long serve waits for the watcher's first
// fingerprint before it loads: long enough for honest files, so a change
// made while egressd starts is a reload, not a miss; past it, the watcher
// reloads once when it is built.
const watchStartWait = 500 * time.Millisecond

func startWatch(current func() proxy.WatchSet) *watchStart {
	s := &watchStart{built: make(chan watchBuilt, 1)}
	go func() {
		w, err := proxy.NewWatcher(current, reloadSettle)
		s.built <- watchBuilt{w, err}
	}()
	select {
	case b := <-s.built:
		s.built <- b
		s.early = true
	case <-time.After(watchStartWait):
	}
	return s
}

// run follows the files until ctx ends, once the watcher is built.
func (s *watchStart) run(ctx context.Context, reload func(), stderr io.Writer) {
	select {
	case b := <-s.built:
		if b.err != nil {
			fmt.Fprintf(stderr, "egressd: warning: manifest changes are not watched (%v); SIGHUP still reloads\n", b.err)
			return
		}
		if !s.early {
			b.w.AssumeChanged()
		}
		b.w.Run(ctx, reload)
	case <-ctx.Done():
		go s.close()
	}
}

// close releases a watcher that will not run, once it is built.
func (s *watchStart) close() {
	if b := <-s.built; b.err == nil {
		b.w.Close()
	}
}

// errStoppedWhileStarting is startDaemon's answer to SIGTERM or SIGINT.
var errStoppedWhileStarting = errors.New("stopped while starting")

// startDaemon starts d while still answering signals: a manifest read that
// does not finish (a FUSE mount that never answers) must not make egressd
// ignore SIGTERM for its deadline. SIGTERM or SIGINT cancels the start and
// stops what it opened; a SIGHUP is reported, to reload once started; a
// SIGUSR1 (reopen the audit log just opened) is dropped.
func startDaemon(ctx context.Context, cancel context.CancelFunc, d *proxy.Daemon, sig <-chan os.Signal) (hup bool, err error) {
	done := make(chan error, 1)
	go func() { done <- d.Start(ctx) }()
	for {
		select {
		case err := <-done:
			return hup, err
		case s := <-sig:
			switch s {
			case syscall.SIGHUP:
				hup = true
			case syscall.SIGTERM, syscall.SIGINT:
				cancel()
				<-done // prompt: the manifest reads stop waiting when ctx ends
				return false, errStoppedWhileStarting
			}
		}
	}
}

// reloader runs reloads on a goroutine of their own, so that a reload
// stuck on a file (a FIFO put where a manifest was) never keeps the signal
// loop from SIGTERM. Requests made while one runs fold into one more.
func reloader(ctx context.Context, d *proxy.Daemon, stderr io.Writer) func() {
	requests := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-requests:
				notify(stderr, daemon.SdNotifyReloading)
				if err := d.Reload(ctx); err != nil {
					printLines(stderr, "egressd: reload: "+err.Error())
				}
				notify(stderr, daemon.SdNotifyReady)
			}
		}
	}()
	return func() {
		select {
		case requests <- struct{}{}:
		default:
		}
	}
}

// notify tells systemd about a state change when NOTIFY_SOCKET is set; it
// does nothing otherwise.
func notify(stderr io.Writer, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		fmt.Fprintln(stderr, "egressd: sd_notify:", err)
	}
}

// embeddedDefault makes "egressd serve" with no config and no manifest serve
// the embedded example integration, written to a temporary folder.
func (f *serveFlags) embeddedDefault() (func(), error) {
	if f.config != "" || f.manifest != "" {
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", "egressd-example-")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "voiceos.integration.json"), configs.DefaultManifest, 0o444); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	f.manifest = dir
	return func() { os.RemoveAll(dir) }, nil
}

// load builds the config from the file or the single-manifest flags, then
// applies the flags that override it. It runs again on every reload.
func (f *serveFlags) load() (policy.Config, error) {
	cfg := policy.DefaultConfig()
	if f.config != "" {
		var err error
		if cfg, err = policy.LoadConfig(f.config); err != nil {
			return cfg, err
		}
	} else {
		cfg.Integrations = []policy.Integration{{Manifest: f.manifest, Listen: f.listen}}
	}
	return f.apply(cfg)
}

// apply lays the command-line flags over cfg.
func (f *serveFlags) apply(cfg policy.Config) (policy.Config, error) {
	var ps []string
	if f.auditLog != "" {
		cfg.Audit.Path = f.auditLog
	}
	if f.state != "" {
		cfg.StateDir = f.state
	}
	if f.admin != "" {
		cfg.Admin = f.admin
	}
	if len(f.resolvers) > 0 {
		cfg.Resolvers = f.resolvers
	}
	for _, r := range cfg.Resolvers {
		if _, err := netip.ParseAddrPort(r); err != nil {
			ps = append(ps, fmt.Sprintf("--resolver: must be an address and port like \"127.0.0.53:53\" (%q)", r))
		}
	}
	ex := policy.Exemptions{}
	if f.mode != "" {
		m, err := policy.ParseMode(f.mode)
		if err != nil {
			ps = append(ps, "--mode: "+err.Error())
		}
		ex.Mode = m
	}
	for _, s := range f.allowPrivate {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			ps = append(ps, fmt.Sprintf("--allow-private: must be a CIDR like \"10.0.0.0/8\" (%q)", s))
			continue
		}
		ex.AllowPrivate = append(ex.AllowPrivate, p.Masked())
	}
	for _, s := range f.allowPorts {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != s {
			ps = append(ps, fmt.Sprintf("--allow-port: must be a port from 1 to 65535 (%q)", s))
			continue
		}
		ex.AllowPorts = append(ex.AllowPorts, uint16(n))
	}
	for i := range cfg.Integrations {
		in := &cfg.Integrations[i]
		in.Exemptions.AllowPrivate = append(in.Exemptions.AllowPrivate, ex.AllowPrivate...)
		in.Exemptions.AllowPorts = append(in.Exemptions.AllowPorts, ex.AllowPorts...)
		if f.mode != "" {
			in.Exemptions.Mode = ex.Mode
		}
	}
	if len(ps) > 0 {
		return cfg, &policy.ConfigError{Problems: ps}
	}
	return cfg, nil
}

func printConfigError(w io.Writer, file string, err error) {
	prefix := "egressd serve: "
	if file != "" {
		prefix = file + ": "
	}
	for _, line := range configProblems(err) {
		printLine(w, "%s%s", prefix, line)
	}
}

// hostAddrsChanged records each change of the host's own addresses, and
// says loudly when they can no longer be read (every address is then
// refused until they can).
func hostAddrsChanged(log *audit.Log, stderr io.Writer) func([]netip.Addr, error) {
	return func(addrs []netip.Addr, err error) {
		ev := audit.Event{Kind: audit.Lifecycle, Action: "host_addresses"}
		if err != nil {
			ev.Err = audit.Cap(err.Error(), 500)
			ev.Msg = "the host's own addresses are unknown: connections are refused until they can be read"
			fmt.Fprintln(stderr, "egressd: warning:", ev.Msg+":", err)
		} else {
			ev.Msg = audit.Cap(fmt.Sprint(addrs), 2000)
		}
		log.Write(ev)
	}
}

// buildDaemon wires the packages together for cfg.
func buildDaemon(ctx context.Context, cfg policy.Config, f serveFlags, sink *auditSink, stderr io.Writer) (*proxy.Daemon, *adminServer, error) {
	stateDir := cfg.StateDir
	if stateDir == "" {
		stateDir = policy.DefaultStateDir()
	}
	mem, err := policy.OpenMemory(stateDir)
	if err != nil {
		return nil, nil, err
	}
	go mem.KeepUp(ctx, time.Second) // its reloads may be hours apart
	// Version memory is every integration's: one that cannot be read
	// (vanished, corrupt, unreadable) stops the start, whereas one
	// integration's broken manifest stops only that integration.
	if _, err := mem.Read(); err != nil {
		return nil, nil, fmt.Errorf("cannot start: %w", err)
	}
	memoryWarning := mem.NewWarning() // before the first load writes the file
	resolvers := cfg.Resolvers
	if len(resolvers) == 0 {
		if resolvers, err = systemResolvers(); err != nil {
			return nil, nil, err
		}
	}
	brokerOpts, err := loadBroker(cfg.TLS)
	if err != nil {
		return nil, nil, err
	}
	registry := policy.NewRegistry(mem, nil)
	opts := audit.Options{Key: sink.key, KeyID: cfg.Audit.KeyID, Generation: func() uint64 { return registry.Snapshot().Generation },
		OnFailure: func(err error) {
			consequence := "new connections are refused (audit_unavailable)"
			if cfg.Audit.OnFailure == policy.ContinueOnAuditFailure {
				consequence = "connections continue unrecorded (audit.on_failure: continue)"
			}
			fmt.Fprintf(stderr, "egressd: audit log unavailable: %v; %s\n", err, consequence)
		}}
	if cfg.Audit.Checkpoints != "none" {
		opts.Checkpoint = stderr
	}
	// serve's log holds many integrations: its genesis and checkpoints say
	// serve, which no integration id can be (an id has a dot), so a
	// journal shared with egressd run's checkpoints verifies either's files.
	opts.Integration = serveLogName
	if sink.file == nil {
		// On stdout, the state folder remembers each run's last hash, so the
		// next run's genesis links to it as a run appended to a file does.
		opts.RunLink = filepath.Join(stateDir, "audit-stdout.link")
	}
	log, err := audit.New(sink.out, opts)
	if err != nil {
		return nil, nil, err
	}
	warnNewMemory(memoryWarning, log, stderr)
	for _, msg := range policy.GuessableWarnings(cfg) {
		fmt.Fprintln(stderr, "egressd: warning:", msg)
	}
	if err := proxy.FollowHostAddrs(ctx, registry.HostAddrs(), hostAddrsChanged(log, stderr)); err != nil {
		err = fmt.Errorf("cannot start: %w", err)
		endAuditLog(log, err)
		return nil, nil, err
	}
	reg := proxy.NewPromRegistry()
	metrics := proxy.NewMetrics(reg)
	metrics.AuditHealthy.Set(1)
	res := proxy.NewResolver(resolvers, cfg.Timeouts.DNS)
	res.Observe = metrics.ObserveDNS
	maxConns := cfg.Limits.MaxConnections
	if maxConns == 0 {
		maxConns = proxy.DefaultMaxConnections(proxy.NofileLimit())
	}
	d := &proxy.Daemon{
		LoadConfig:            f.load,
		Registry:              registry,
		Audit:                 log,
		Suppress:              audit.NewSuppressor(log, time.Second),
		Metrics:               metrics,
		Resolver:              res,
		Gate:                  proxy.NewGate(maxConns),
		DerivedMaxConnections: proxy.DefaultMaxConnections(proxy.NofileLimit()),
		Warn:                  func(s string) { fmt.Fprintln(stderr, "egressd: warning:", s) },
		Broker:                brokerOpts,
	}
	d.LoadConfig = tlsFixedAtStart(f.load, cfg.TLS, d.Warn, log)
	var admin *adminServer
	if cfg.Admin != "" {
		ln, err := net.Listen("tcp", cfg.Admin)
		if err != nil {
			err = fmt.Errorf("admin: %w", err)
			endAuditLog(log, err)
			return nil, nil, err
		}
		admin = &adminServer{ln: ln, reg: reg}
		fmt.Fprintf(stderr, "egressd: admin on %s\n", ln.Addr())
	}
	return d, admin, nil
}

type adminServer struct {
	ln  net.Listener
	reg *prometheus.Registry
}

func (a *adminServer) serve(d *proxy.Daemon) {
	proxy.ServeAdmin(a.ln, proxy.AdminHandler(d.Ready, a.reg))
}

func (a *adminServer) close() { a.ln.Close() }

// reloadSettle is how long watched files must stay quiet before a reload:
// editors and deploy tools write in bursts.
var reloadSettle = 250 * time.Millisecond

func watchSet(cfg policy.Config, configFile string) proxy.WatchSet {
	var manifests, roots []string
	for _, in := range cfg.Integrations {
		manifests = append(manifests, in.Manifest)
	}
	for _, md := range cfg.ManifestDirs {
		roots = append(roots, md.Dir)
	}
	w := proxy.WatchSetFor(manifests, roots, configFile)
	for _, in := range cfg.Integrations {
		for _, s := range in.Secrets {
			w.Files = append(w.Files, s.From) // a rotated value file (a Secret volume's update) is a reload
		}
	}
	return w
}

// serveLogName is what serve's genesis and checkpoints name as their
// integration (audit.Options.Integration).
const serveLogName = "serve"

// maxJournalLine bounds each line serve writes to stderr, the journal:
// below every common sink's split (rsyslog 8 KiB, Docker 16 KiB, journald
// 48 KiB), so no piece of a line begins where an author chose.
const maxJournalLine = 4096
