package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/linejoin"
	"github.com/egressd/egressd/internal/safefile"
	"github.com/egressd/egressd/internal/termsafe"
	"github.com/egressd/egressd/internal/workdir"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/proxy"
	"github.com/egressd/egressd/sandbox"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

type runFlags struct {
	serveFlags
	auditKey        string
	insecureEnvOnly bool
	envPassthrough  multiFlag
	secrets         multiFlag // NAME=HOST[,HOST…]
	upstreamCA      string
	// checkpoints receives the audit log's checkpoint lines when the
	// config file sets audit.checkpoints: stderr (run's stderr).
	checkpoints io.Writer
	// stderr is the joint egressd's stderr lines and the program's relayed
	// stderr share: egressd's line never continues the program's.
	stderr *linejoin.Joint
}

func runRun(args []string, stdout, stderr io.Writer) int {
	var f runFlags
	fs := newFlagSet("run", "usage: egressd run [--manifest PATH | DIR] [flags] [-- COMMAND ARGS...]\n\nRuns the integration's program (the manifest's local-mcp runtime, or COMMAND) in\nits own namespaces, where the egress proxy is its only way out. stdin, stdout and\nstderr pass through; its exit status becomes egressd's.", stderr)
	fs.StringVar(&f.manifest, "manifest", "", "the integration's manifest file or folder")
	fs.StringVar(&f.config, "config", "", "operator config: its limits, timeouts, denials, resolvers, audit key and env_passthrough apply (its integrations do not)")
	fs.StringVar(&f.auditLog, "audit-log", "", "audit log file (default STATE/audit/ID.PID.log, ID@claim.PID.log for an unapproved claim of another folder's id; never stdout, which is the program's)")
	fs.StringVar(&f.auditKey, "audit-key", "", "HMAC key file for the audit chain (e.g. $CREDENTIALS_DIRECTORY/audit-key)")
	fs.StringVar(&f.state, "state", "", "version memory and the integration's writable folder (default "+policy.DefaultStateDir()+")")
	fs.StringVar(&f.mode, "mode", "", "enforce or audit")
	fs.Var(&f.resolvers, "resolver", "upstream DNS server host:port, repeatable (default /etc/resolv.conf)")
	fs.Var(&f.allowPrivate, "allow-private", "dev/test exemption: a CIDR inside the denied ranges, repeatable")
	fs.Var(&f.allowPorts, "allow-port", "exemption: a port besides 443, repeatable (also captured transparently)")
	fs.Var(&f.envPassthrough, "env", "a launcher variable to pass to the program besides the manifest's, repeatable")
	fs.Var(&f.secrets, "secret", "NAME=HOST[,HOST…]: the program sees a placeholder in NAME; egressd puts the value (from its own environment) in request headers to these hosts only, over TLS it verified; repeatable")
	fs.StringVar(&f.upstreamCA, "upstream-ca", "", "PEM roots, besides the system's, that bound hosts' certificates are verified with (private PKI, tests)")
	fs.BoolVar(&f.insecureEnvOnly, "insecure-env-only", false, "no sandbox: only set the proxy variables, which the program may ignore")
	words, after, _, err := scanFlags(fs, args, true)
	if err != nil {
		return exitUsage
	}
	f.stderr = &linejoin.Joint{}
	stderr = termsafe.LinesUpTo(f.stderr.Own(stderr), maxJournalLine) // every message one line, escaped and bounded, and never after the program's unterminated line
	command, err := runCommandLine(fs, &f, words, after)
	if err == nil && f.manifest != "" {
		f.manifest, err = workdir.Abs(f.manifest) // DIR is a place like --manifest's (see pathFlags)
	}
	if err != nil {
		if err != errFlagsSaid {
			fmt.Fprintln(stderr, "egressd run:", err)
		}
		return exitUsage
	}
	if f.manifest == "" {
		fs.Usage()
		return exitUsage
	}
	f.checkpoints = stderr
	r, err := prepareRun(f, command)
	if err != nil {
		fmt.Fprintln(stderr, "egressd run:", err)
		return exitFail
	}
	fmt.Fprintf(stderr, "egressd run: audit log %s\n", r.logPath)
	r.announcePolicy(stderr)
	var code int
	if f.insecureEnvOnly {
		code = r.envOnly(stderr)
	} else {
		code = r.sandboxed(stderr)
	}
	return r.closeReporting(code, stderr)
}

// closeReporting closes the run and returns its exit status: the
// program's, or exitFail when the program exited 0 but the audit log did
// not close cleanly (its shutdown record, or the link file the next run's
// genesis reads). A run whose evidence is incomplete must not read as a
// success to whatever checks its status; the line on stderr says what.
func (r *runSetup) closeReporting(code int, stderr io.Writer) int {
	if err := r.close(); err != nil {
		fmt.Fprintln(stderr, "egressd run:", err)
		if code == exitOK {
			return exitFail
		}
	}
	return code
}

// runCommandLine reads the words of run's command line around its flags
// (scanFlags stopped at the first word): with --manifest the first word
// begins the program's command line, whose flags are its own; otherwise
// it is the integration's folder, which run's flags may follow, and the
// program follows "--". It returns the program's command line, or what
// is wrong with the words (errFlagsSaid: the flag package said it).
func runCommandLine(fs *flag.FlagSet, f *runFlags, words, after []string) ([]string, error) {
	command := append(words, after...)
	if f.manifest != "" || len(command) == 0 {
		return command, nil
	}
	if len(words) == 0 { // egressd run -- DIR [-- COMMAND…]
		words, command = command[:1], command[1:]
		if len(command) > 0 && command[0] != "--" {
			return nil, errCommandAfterDashes
		}
		f.manifest = words[0]
		if len(command) > 0 {
			command = command[1:]
		}
		return command, nil
	}
	more, command, _, err := scanFlags(fs, words[1:], false)
	switch {
	case err != nil:
		return nil, errFlagsSaid
	case f.manifest != "":
		return nil, errors.New("give the integration's folder or --manifest PATH, not both")
	case len(more) > 0:
		return nil, errCommandAfterDashes
	}
	f.manifest = words[0]
	return command, nil
}

var (
	errFlagsSaid          = errors.New("flags")
	errCommandAfterDashes = errors.New("put the command after --: egressd run DIR -- COMMAND ARGS...")
)

// runSetup is everything "egressd run" decided before anything starts.
type runSetup struct {
	policy   *policy.Policy
	cfg      policy.Config
	registry *policy.Registry
	loaded   policy.Outcome // the manifest's load, for the policy event
	log      *audit.Log
	sink     *auditSink
	logPath  string
	auditDir *os.File // STATE/audit, held open while its files are used through it
	server   *proxy.Server
	suppress *audit.Suppressor
	spec     sandbox.Spec
	opts     sandbox.Options
	env      envReport
	// memoryWarning says version memory was new or empty before the load.
	memoryWarning string
	// removeBundle deletes the sandbox's trust bundle file, if a secret
	// is bound.
	removeBundle func()
	// folder is the integration folder, opened once before its manifest
	// was read (sandbox.OpenFolder); the sandbox binds it.
	folder *os.File
}

// prepareRun reads the manifest once, before the program starts, applies
// the version rules, and builds the program's spec.
func prepareRun(f runFlags, command []string) (_ *runSetup, err error) {
	var removeBundle func() // the trust bundle, if the run fails to prepare
	defer func() {
		if err != nil && removeBundle != nil {
			removeBundle()
		}
	}()
	f.listen = "sandbox"
	abs, err := workdir.Abs(f.manifest) // the folder is bound, and entered, at this absolute path
	if err != nil {
		return nil, err
	}
	f.manifest = abs
	// The folder is opened once, before its manifest is read: what runs,
	// and what is bound, is this folder, wherever the path (an author's
	// deploy link) points later.
	folderPath := abs
	if st, err := os.Stat(abs); err == nil && !st.IsDir() {
		folderPath = filepath.Dir(abs)
	}
	folder, err := sandbox.OpenFolder(folderPath)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			folder.Close()
		}
	}()
	cfg, err := f.loadForRun()
	if err != nil {
		return nil, err
	}
	if err := f.bindSecrets(&cfg); err != nil {
		return nil, err
	}
	cfg.Integrations[0].Folder = folder // the manifest is read through it
	stateDir := cfg.StateDir
	if stateDir == "" {
		stateDir = policy.DefaultStateDir()
	}
	mem, err := policy.OpenMemory(stateDir)
	if err != nil {
		return nil, err
	}
	memoryWarning := mem.NewWarning() // before the load writes the file
	registry := policy.NewRegistry(mem, nil)
	// The supervisor lives as long as the run: the host's addresses are
	// followed for that long, and egressd refuses to run without them.
	if err := proxy.FollowHostAddrs(context.Background(), registry.HostAddrs(), nil); err != nil {
		return nil, err
	}
	before, err := mem.Read() // whose state an earlier egressd kept under the id alone (and after the load, below)
	if err != nil {
		return nil, err
	}
	loaded := registry.Load(cfg)[0]
	if loaded.Result == policy.Failed {
		return nil, fmt.Errorf("%s: %s", loaded.Key, termsafe.OneLine(loaded.Err.Error())) // stderr takes one line a message
	}
	key := cfg.Integrations[0].Manifest
	p := registry.Policy(key)
	if p.PendingUnbound {
		// Version memory from an earlier egressd cannot say whose state is
		// kept under this id; a run now would make this folder state of its
		// own, and the id's state could then never move to it on approval.
		return nil, fmt.Errorf("%s", termsafe.OneLine(p.PendingNotice()))
	}
	manifestFile := p.ManifestAt
	dir := filepath.Dir(manifestFile)
	if dir != folderPath {
		return nil, fmt.Errorf("%s: the manifest was read from %s, not from the folder opened (%s): was the path changed?", abs, manifestFile, folderPath)
	}
	realDir, err := sandbox.FolderPath(folder)
	if err != nil {
		return nil, err
	}
	byOperator := true // the command after --, or the manifest's
	if len(command) == 0 {
		switch rt := p.Manifest.Runtime; rt.Kind {
		case "local-mcp":
		case "":
			return nil, fmt.Errorf("%s declares no local runtime: give the command to run after --", p.Manifest.ID)
		default:
			return nil, fmt.Errorf("%s is a %s integration: nothing runs locally, so there is nothing to sandbox (give a command after --)", p.Manifest.ID, rt.Kind)
		}
		rt := p.Manifest.Runtime
		command = append([]string{rt.Command}, rt.Args...)
		byOperator = false
	}
	program, err := sandbox.ResolveProgramIn(command[0], dir, realDir, byOperator)
	if err != nil {
		return nil, err
	}
	if !f.insecureEnvOnly {
		looked, _ := exec.LookPath(command[0]) // the shim itself, before its symlinks are followed
		if err := sandbox.RefuseHomeShim(command[0], looked, os.Getenv("HOME"), os.Getenv("PATH")); err != nil {
			return nil, err
		}
	}
	r := &runSetup{policy: p, cfg: cfg, registry: registry, loaded: loaded, folder: folder, memoryWarning: memoryWarning}
	after, err := mem.Read()
	if err != nil {
		return nil, err
	}
	name, legacy := stateName(p.Manifest.ID, manifestFile), ""
	if before.InheritsIDState(p.Manifest.ID, policy.ManifestPlace(manifestFile), after) {
		legacy = p.Manifest.ID
	}
	integrationState, stateUID, err := sandbox.ClaimStateFolder(filepath.Join(stateDir, "sandbox"), name, legacy)
	if err != nil {
		return nil, fmt.Errorf("state folder: %w", err)
	}
	hostUID, hostGID, owner := os.Getuid(), os.Getgid(), -1
	if hostUID == 0 {
		hostUID, hostGID, owner = stateUID, stateUID, stateUID
	}
	use, err := sandbox.TidyStateFolder(integrationState, owner, owner)
	if err != nil {
		return nil, err
	}
	r.opts = sandbox.Options{HostUID: hostUID, HostGID: hostGID, Folder: folder, Key: name, Stderr: f.stderr}
	if os.Getuid() == 0 && !f.insecureEnvOnly {
		// The kernel bounds the state: an ext4 image of state_mb, seeded
		// once from the folder earlier versions used.
		image, err := sandbox.ClaimStateImage(filepath.Join(stateDir, "sandbox-images"), name, legacy) // not beside the folders: an id may end in .ext4
		if err != nil {
			return nil, fmt.Errorf("state image: %w", err)
		}
		if r.opts.StateMount, err = sandbox.MountStateImage(image, cfg.Sandbox.StateMB, stateUID, integrationState); err != nil {
			return nil, fmt.Errorf("state image %s: %w", image, err)
		}
	} else if err := cfg.Sandbox.CheckState(use); err != nil {
		return nil, err
	}
	ports := []uint16{policy.DefaultPort}
	ports = append(ports, cfg.Integrations[0].Exemptions.AllowPorts...)
	readOnly := []string{dir}
	if program.Bind != "" {
		readOnly = append(readOnly, program.Bind)
	}
	passthrough := append(append([]string{}, cfg.EnvPassthrough...), f.envPassthrough...)
	secretNames, placeholders := placeholderEnv(p.Secrets())
	launcher, carriers := sandbox.WithoutSecrets(os.Environ(), secretValues(p.Secrets()))   // the values stay in egressd
	r.env = newEnvReport(launcher, p.Manifest.EnvKeys, append(passthrough, secretNames...)) // a bound key is the operator's choice
	r.env.carriers = carriers
	env := sandbox.BuildEnv(launcher, p.Manifest.EnvKeys, passthrough)
	var brokerOpts *proxy.BrokerOptions
	var bundle string
	if len(p.Secrets()) > 0 {
		if brokerOpts, bundle, removeBundle, err = brokerForRun(p.Secrets(), f.upstreamCA); err != nil {
			return nil, err
		}
		r.removeBundle = removeBundle
		env = sandbox.BrokeredEnv(env, placeholders)
	}
	r.spec = sandbox.Spec{
		Command: program.Path, Args: command, Dir: dir,
		TrustBundle:  bundle,
		Env:          env,
		ReadOnly:     readOnly,
		StateDir:     integrationState,
		CapturePorts: ports,
		Limits:       cfg.Sandbox,
	}
	if f.auditKey == "" {
		f.auditKey = cfg.Audit.KeyFile
	}
	if err := r.openAudit(f, stateDir, logName(p)); err != nil {
		return nil, err
	}
	resolvers := cfg.Resolvers
	if len(resolvers) == 0 {
		if resolvers, err = systemResolvers(); err != nil {
			return nil, err
		}
	}
	r.suppress = audit.NewSuppressor(r.log, time.Second)
	r.suppress.SetNAT64(cfg.NAT64)
	r.server = proxy.New(proxy.Options{
		Key: key, Registry: registry, Resolver: proxy.NewResolver(resolvers, cfg.Timeouts.DNS), Audit: r.log,
		Suppress: r.suppress, Limits: cfg.Limits, Timeouts: cfg.Timeouts,
		OnAuditFailure: cfg.Audit.OnFailure, Gate: proxy.NewGate(proxy.DefaultMaxConnections(proxy.NofileLimit())),
		Broker: brokerOpts,
	})
	return r, nil
}

// bindSecrets puts the --secret bindings on the run's one integration; the
// registry validates them against the manifest as it loads it.
func (f runFlags) bindSecrets(cfg *policy.Config) error {
	if len(f.secrets) == 0 {
		if f.upstreamCA != "" {
			return errors.New("--upstream-ca verifies the hosts a secret is bound to: give --secret too")
		}
		return nil
	}
	if f.insecureEnvOnly {
		return errors.New("--secret needs the sandbox: without it the program could read the value from egressd's own environment")
	}
	specs, err := secretSpecs(f.secrets, os.LookupEnv)
	if err != nil {
		return err
	}
	in := &cfg.Integrations[0]
	in.Secrets = specs
	in.PassedEnv = append(append([]string{}, cfg.EnvPassthrough...), f.envPassthrough...)
	return nil
}

// stateName names the persistent sandbox state of id loaded from
// manifestFile: its own, never that of another place (folder or manifest
// file) claiming the id.
func stateName(id, manifestFile string) string {
	return sandbox.StateName(id, policy.ManifestPlace(manifestFile))
}

// loadForRun is serveFlags.load for one manifest: with --config, the
// operator's settings apply to it, and the config's own integrations (and
// their listeners) do not; the integration named for this manifest, if
// any, lends its exemptions.
func (f runFlags) loadForRun() (policy.Config, error) {
	if f.config == "" {
		return f.load()
	}
	cfg, err := policy.LoadConfig(f.config)
	if err != nil {
		return cfg, err
	}
	in := policy.Integration{Manifest: f.manifest, Listen: "sandbox", Exemptions: policy.Exemptions{Mode: cfg.Mode}}
	if c, ok := cfg.EntryFor(f.manifest); ok {
		in.Exemptions, in.Widen, in.PinDigest = c.Exemptions, c.Widen, c.PinDigest
	}
	cfg.Integrations = []policy.Integration{in}
	g := f.serveFlags
	g.config = "" // flags still override the file
	return g.apply(cfg)
}

// logName is the name a run's audit log file begins with: the id in force,
// and for an unapproved claim of another folder's id "ID@claim", so a
// claim's runs are never listed as the owner's.
func logName(p *policy.Policy) string {
	id, _ := p.InForce()
	if p.Claim() != "" {
		return id + "@claim" // "@" is in no id, so no integration's own runs are named so
	}
	return id
}

// openAudit opens the run's audit log: by default a file of its own,
// STATE/audit/NAME.PID.log (NAME from logName; NAME.PID.N.log when that
// exists), whose genesis names the
// previous run of the same name through a link file beside it
// (audit.Options.RunLink), so that deleting a whole run's file breaks a
// link verify checks. Checkpoints go to stderr when a config file asks for
// them (serve's default, since a config file means the same for both);
// without --config, none.
func (r *runSetup) openAudit(f runFlags, stateDir, name string) error {
	maxSize := int64(r.cfg.Audit.MaxSizeMB) << 20
	// The key is read before any file is made: a run refused here must
	// leave no empty run file behind to break every later verify.
	var key []byte
	if f.auditKey != "" {
		var err error
		if key, err = readAuditKey(os.ExpandEnv(f.auditKey)); err != nil {
			return err
		}
	}
	if f.auditLog != "" && f.auditLog != "-" {
		file, err := audit.OpenFile(f.auditLog, maxSize)
		if err != nil {
			return err
		}
		return r.startAudit(f, file, f.auditLog, "", name, key)
	}
	// The state folder may be the service user's: a symlink there would
	// have root create the log and rename NAME.lastrun wherever it points.
	// The folder is opened without following one, and its files are
	// reached through that descriptor (/proc/self/fd/N/FILE), so a
	// symlink swapped in later is never followed either.
	dir, err := safefile.MakeFolder(filepath.Join(stateDir, "audit"))
	if err != nil {
		return err
	}
	r.auditDir = dir
	at := "/proc/self/fd/" + strconv.Itoa(int(dir.Fd()))
	file, fileName, err := newRunFile(at, name, maxSize)
	if err != nil {
		return err
	}
	err = r.startAudit(f, file, filepath.Join(dir.Name(), fileName), filepath.Join(at, name+".lastrun"), name, key)
	if err != nil {
		removeIfEmpty(at, fileName)
		// The folder is reached through /proc/self/fd/N: name it as the
		// operator knows it.
		return errors.New(strings.ReplaceAll(err.Error(), at+"/", dir.Name()+"/"))
	}
	return nil
}

// removeIfEmpty removes the run's own file, made by this run, when its
// audit log could not start in it: an empty ID.PID.log holds no run and
// would break every later verify of the id's files. A file something
// wrote to is kept.
func removeIfEmpty(at, fileName string) {
	var st unix.Stat_t
	if unix.Fstatat(unix.AT_FDCWD, filepath.Join(at, fileName), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Size == 0 && st.Mode&unix.S_IFMT == unix.S_IFREG {
		unix.Unlink(filepath.Join(at, fileName))
	}
}

// newRunFile creates the run's own file in the folder at: NAME.PID.log, or
// NAME.PID.N.log when a run with the same PID left its file there (PIDs
// repeat: PID 1 at each start of a container). The file is always new, so
// it holds this run alone, as its genesis says (audit.OwnFile).
func newRunFile(at, name string, maxSize int64) (*audit.File, string, error) {
	base := name + "." + strconv.Itoa(os.Getpid())
	for n := 1; ; n++ {
		file := base + ".log"
		if n > 1 {
			file = base + "." + strconv.Itoa(n) + ".log"
		}
		f, err := audit.CreateFile(filepath.Join(at, file), maxSize)
		if !errors.Is(err, fs.ErrExist) || n == 1000 {
			return f, file, err
		}
	}
}

// startAudit starts the run's chain in file, which path names.
// name is the stem of the run's files, which the genesis and checkpoints
// carry (audit.Options.Integration).
func (r *runSetup) startAudit(f runFlags, file *audit.File, path, runLink, name string, key []byte) error {
	var err error
	var checkpoints io.Writer
	if f.config != "" && r.cfg.Audit.Checkpoints != "none" {
		checkpoints = f.checkpoints
	}
	registry := r.registry
	r.sink, r.logPath = &auditSink{out: file, file: file}, path
	r.log, err = audit.New(file, audit.Options{Key: key, KeyID: r.cfg.Audit.KeyID, RunLink: runLink, Checkpoint: checkpoints, Integration: name,
		Generation: func() uint64 { return registry.Snapshot().Generation }})
	return err
}

// close ends the run: the audit log's shutdown record and link file, then
// the files it held. It returns the audit log's error, its paths named as
// the operator knows them.
func (r *runSetup) close() (err error) {
	if r.folder != nil {
		r.folder.Close()
	}
	defer func() {
		if r.auditDir != nil {
			r.auditDir.Close() // after the log: its last writes go through it
		}
	}()
	if r.removeBundle != nil {
		r.removeBundle()
	}
	if r.log != nil {
		err = r.log.Close()
	}
	if r.sink != nil {
		r.sink.close()
	}
	if err != nil && r.auditDir != nil {
		at := "/proc/self/fd/" + strconv.Itoa(int(r.auditDir.Fd())) + "/"
		err = errors.New(strings.ReplaceAll(err.Error(), at, r.auditDir.Name()+"/"))
	}
	return err
}

// sandboxed runs the program in the sandbox and returns its exit status.
func (r *runSetup) sandboxed(stderr io.Writer) int {
	p := r.policy
	term := sandbox.SaveStdioFlags() // a pipe it shares may be left non-blocking; a terminal is relayed
	defer term.Restore()
	sb, err := sandbox.Start(r.spec, r.opts)
	if r.opts.StateMount != nil {
		r.opts.StateMount.Close() // the sandbox holds its own reference now
	}
	if err != nil {
		fmt.Fprintln(stderr, "egressd run:", err)
		r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "sandbox_refused", Err: audit.Cap(err.Error(), 1000)}))
		return exitFail
	}
	defer sb.Close()
	grace := r.cfg.Timeouts.StopGrace
	stop := forwardSignals(func(s os.Signal) error { sb.Stop(s, grace); return nil }) // before the target can print "ready"
	// What a burst sent past egress0's queue was dropped unread: counted,
	// each second and at exit.
	warned := false // countUnseen runs on one goroutine, then after it
	countUnseen := func() {
		if n, err := sb.EgressDropped(); err != nil && !warned {
			warned = true
			fmt.Fprintln(stderr, "egressd: warning:", err)
		} else if err == nil {
			r.server.RefuseDirectUnseen(n)
		}
	}
	stopAudit := r.maintainAudit(stderr, countUnseen)
	names := proxy.NewSynthetic(1<<16-2, 5*time.Minute)
	go r.server.Serve(sb.Proxy)
	for _, ln := range sb.Capture {
		go r.server.ServeCaptured(ln, names)
	}
	egressDone := make(chan struct{})
	go func() {
		sandbox.ServeEgress(sb.Egress, func(a sandbox.Attempt) { r.server.RefuseDirect(a.Proto, a.Dst) })
		close(egressDone)
	}()
	resolver := &proxy.SandboxDNS{Server: r.server, Synthetic: names, TTL: 30}
	dnsServers := []*dns.Server{resolver.UDPServer(sb.DNSUDP), resolver.TCPServer(sb.DNSTCP)} // TCP: bounded connections and messages
	for _, s := range dnsServers {
		go s.ActivateAndServe()
	}
	for _, name := range r.cfg.Integrations[0].Exemptions.Names() {
		fmt.Fprintf(stderr, "egressd: warning: exemption in force for %s: %s\n", p.Manifest.ID, name)
		r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "exemption", Exemption: name}))
	}
	r.env.report(stderr, r.log, p)
	announceSecrets(r.log, p)
	for _, msg := range policy.GuessableWarnings(r.cfg) {
		fmt.Fprintln(stderr, "egressd: warning:", msg)
	}
	if sandbox.SharesLaunchersUID(r.opts.HostUID) {
		msg := "the sandbox runs as your uid, and the kernel counts these per uid: the program can take them from every process of yours while it runs: " +
			sandbox.SharedUserQuotas + "; run egressd as root for a uid of the sandbox's own"
		fmt.Fprintln(stderr, "egressd: warning:", msg)
		r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "shared_user_quotas", Msg: msg}))
	}
	if err := sb.Run(); err != nil {
		sb.Kill()
		fmt.Fprintln(stderr, "egressd run:", err)
		r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "sandbox_refused", Err: audit.Cap(err.Error(), 1000)}))
		return exitFail
	}
	r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "start", Msg: "sandboxed: " + r.spec.Command}))
	r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "limits", Msg: limitsMessage(r.spec.Limits, r.opts.StateMount != nil)}))
	r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "limits", Msg: kernelLimitsMessage}))
	r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "limits", Msg: networkLimitsMessage(r.spec.Limits)}))
	r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "limits", Msg: processLimitsMessage(r.spec.AllowSetsid)}))
	r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "limits", Msg: sb.CgroupBounds()}))
	if msg := policy.SandboxMemoryWarning(r.spec.Limits, hostFileMax()); msg != "" && len(sb.CgroupDirs()) > 0 {
		fmt.Fprintln(stderr, "egressd: warning:", msg)
	}
	code := sb.Wait()
	term.Restore() // before egressd writes to a terminal whose output the program may have stopped
	stop()
	// Audit what the program sent last, then stop; a file without
	// deadlines is closed instead, so nothing waits forever.
	if err := sb.Egress.SetReadDeadline(time.Now()); err != nil {
		sb.Egress.Close()
	}
	<-egressDone
	stopAudit()
	countUnseen()
	r.reportState(stderr)
	for _, s := range dnsServers {
		s.Shutdown()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r.server.Shutdown(ctx)
	r.suppress.Flush(true)
	r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "stop", Msg: exitMessage(sb, code, grace)}))
	return code
}

// envOnly is --insecure-env-only: no namespaces, only the proxy variables.
// The program can ignore them; this is said at start and in the audit log.
func (r *runSetup) envOnly(stderr io.Writer) int {
	p := r.policy
	const warning = "--insecure-env-only: no sandbox; the program is only asked to use the proxy and can ignore it"
	fmt.Fprintln(stderr, "egressd: WARNING:", warning)
	r.log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "insecure_env_only", Exemption: "insecure_env_only", Msg: warning}))
	ln, err := proxy.Listen(context.Background(), "127.0.0.1:0", policy.Peers{}, nil)
	if err != nil {
		fmt.Fprintln(stderr, "egressd run:", err)
		return exitFail
	}
	go r.server.Serve(ln)
	url := "http://" + ln.Addr().String()
	env := sandbox.BuildEnv(os.Environ(), p.Manifest.EnvKeys, nil)
	for i, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); strings.HasSuffix(strings.ToUpper(k), "_PROXY") {
			env[i] = k + "=" + url
		}
		if strings.HasPrefix(kv, "HOME=") {
			env[i] = "HOME=" + os.Getenv("HOME")
		}
	}
	cmd := exec.Command(r.spec.Command, r.spec.Args[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = r.spec.Dir, env, os.Stdin, os.Stdout, os.Stderr
	term := sandbox.SaveTerminal()
	defer term.Restore()
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "egressd run:", err)
		return exitFail
	}
	stop := forwardSignals(cmd.Process.Signal)
	err = cmd.Wait()
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r.server.Shutdown(ctx)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return exitFail
}

// forwardSignals passes SIGINT, SIGTERM and SIGHUP on until stop is called.
func forwardSignals(to func(os.Signal) error) (stop func()) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				to(s)
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(sigs); close(done) }
}
