package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/bounded"
	"github.com/egressd/egressd/internal/termsafe"
	"github.com/egressd/egressd/policy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Daemon runs one proxy per configured integration, each on its own
// listener, and reloads them together. It is what "egressd serve" runs.
type Daemon struct {
	// LoadConfig returns the config to apply on each reload; it is called
	// once at start. Required.
	LoadConfig func() (policy.Config, error)
	Registry   *policy.Registry
	Audit      *audit.Log
	Suppress   *audit.Suppressor
	Metrics    *Metrics
	Resolver   *Resolver
	Gate       *Gate
	// DerivedMaxConnections is the global cap when the config sets none
	// (from RLIMIT_NOFILE); a reload that removes limits.max_connections
	// returns to it.
	DerivedMaxConnections int
	// Warn receives start-up warnings (exemptions in force) for stderr.
	Warn func(string)
	// Broker is what every listener brokers bound hosts with (tls: in
	// the config, read at start); nil when no CA is configured.
	Broker *BrokerOptions

	// reloadMu serialises Start and Reload. It is held across file I/O
	// (the config, every manifest, the state), which a third party may
	// make slow or block; nothing but another reload ever waits on it.
	reloadMu  sync.Mutex
	announced map[exemptionKey]bool // in force, as last announced; under reloadMu
	writable  writableNotices       // under reloadMu
	// noticed is the pending notice last warned of, by integration key,
	// under reloadMu: a reload that finds the same widening still waiting
	// (the watcher's, then the operator's SIGHUP) does not repeat it.
	noticed map[string]string
	// writableReads bounds warnWritableManifests' walks as
	// policy.Registry bounds manifest reads.
	writableReads bounded.Reads
	// mu guards the fields below. It is never held across file I/O or a
	// drain, so Ready, Listeners and Shutdown never wait behind a reload.
	mu        sync.Mutex
	cfg       policy.Config
	listeners map[string]*listener // by integration key
	ready     atomic.Bool
	stopping  atomic.Bool
	serveErr  chan error
}

type listener struct {
	addr   string // as configured
	real   string // as bound, port 0 resolved
	ln     net.Listener
	server *Server
}

// followNAT64 gives the folding the operator's NAT64 prefixes, so the log
// groups an address by the IPv4 address the policy judged it by.
func (d *Daemon) followNAT64(cfg policy.Config) {
	if d.Suppress != nil {
		d.Suppress.SetNAT64(cfg.NAT64)
	}
}

// Start loads the config and every policy, opens every listener and starts
// serving. Only what is everyone's stops the start: the config (one
// manifest configured twice, or two entries with one id that version
// memory cannot tell apart), the version memory, a listener that cannot
// open. An integration whose manifest does not load (broken, a
// version lower than one seen, not read within timeouts.manifest_read)
// must not take the others down, since its author controls that file: its
// listener opens and refuses every connection with manifest_not_loaded,
// stderr and the audit log say why, and a reload that loads it applies.
// When ctx ends while the manifests are read, Start returns at once.
func (d *Daemon) Start(ctx context.Context) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	cfg, err := d.LoadConfig()
	if err != nil {
		return err
	}
	d.listeners = map[string]*listener{}
	d.serveErr = make(chan error, 1)
	d.followNAT64(cfg)
	outs := d.Registry.LoadContext(ctx, cfg)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot start: %w", err)
	}
	d.auditOutcomes(outs)
	var twice []string
	for _, o := range outs {
		if o.StopsStart(cfg) {
			// One line per integration: the journal keeps the folder and
			// its reason together.
			twice = append(twice, fmt.Sprintf("%s: %s", o.Key, termsafe.OneLine(errText(o.Err))))
		}
	}
	if len(twice) > 0 {
		return fmt.Errorf("cannot start: %s", strings.Join(twice, "\n"))
	}
	d.mu.Lock()
	d.cfg = cfg
	for _, in := range cfg.Integrations {
		if err := d.open(ctx, in); err != nil {
			d.mu.Unlock()
			d.closeAll()
			return err
		}
	}
	d.mu.Unlock()
	d.announceExemptions()
	d.warnWritableManifests(ctx, cfg)
	d.warnSharedCap(cfg)
	d.ready.Store(true)
	return nil
}

// warnWritableManifests warns, at start and after a reload, about each
// manifest that someone besides the operator can change (see
// manifestWriters): an integration running as such a user could rewrite
// its own allowlist before the next reload. One line per manifest, again
// only when who can write it changes, within a budget (writableNotices).
//
// Finding who can write a path walks it, which blocks as a manifest read
// does on a file system that never answers: each walk has the manifest
// read's deadline, and one that does not finish is skipped.
func (d *Daemon) warnWritableManifests(ctx context.Context, cfg policy.Config) {
	keys := map[string]bool{}
	for _, in := range cfg.Integrations {
		p := d.Registry.Policy(in.Manifest)
		if p == nil {
			continue
		}
		keys[in.Manifest] = true
		writers, err := bounded.Run(ctx, &d.writableReads, p.ManifestAt, manifestReadTimeout(cfg), func() []string { return manifestWriters(p.ManifestAt) })
		if err != nil {
			continue
		}
		msg, ok := d.writable.notice(in.Manifest, p.Manifest.ID, writers)
		if !ok {
			continue
		}
		if d.Warn != nil {
			d.Warn(msg)
		}
		d.Audit.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "writable_manifest", Msg: msg}))
	}
	d.writable.keep(keys)
}

// warnSharedCap warns when the integrations' own bounds add up to more than
// the global cap (policy.SharedCapWarning).
func (d *Daemon) warnSharedCap(cfg policy.Config) {
	msg := policy.SharedCapWarning(cfg, int(d.Gate.Max()))
	if msg == "" {
		return
	}
	if d.Warn != nil {
		d.Warn(msg)
	}
	d.Audit.Write(audit.Event{Kind: audit.Lifecycle, Action: "shared_cap", Msg: msg})
}

// Errors delivers a listener's fatal serve error.
func (d *Daemon) Errors() <-chan error { return d.serveErr }

// open starts the listener and proxy for one integration. d.mu is held.
func (d *Daemon) open(ctx context.Context, in policy.Integration) error {
	ln, err := Listen(ctx, in.Listen, in.AllowedPeers, func(uid, gid uint32) { d.peerRefused(in, uid, gid) })
	if err != nil {
		return fmt.Errorf("%s: %w", in.Manifest, err)
	}
	s := New(Options{
		Key: in.Manifest, Registry: d.Registry, Resolver: d.Resolver, Audit: d.Audit, Suppress: d.Suppress,
		Metrics: d.Metrics, Limits: d.cfg.Limits, Timeouts: d.cfg.Timeouts, OnAuditFailure: d.cfg.Audit.OnFailure, Gate: d.Gate,
		Broker: d.Broker,
	})
	l := &listener{addr: in.Listen, real: listenerAddr(ln), ln: ln, server: s}
	d.listeners[in.Manifest] = l
	go func() {
		if err := s.Serve(ln); err != nil {
			select {
			case d.serveErr <- fmt.Errorf("%s: %w", l.real, err):
			default:
			}
		}
	}()
	ev := audit.Event{Kind: audit.Lifecycle, Action: "listening", Listener: l.real, Exemption: strings.Join(in.Exemptions.Names(), ",")}
	if p := d.Registry.Policy(in.Manifest); p != nil {
		ev = p.Identify(ev)
		ev.Generation = p.Generation
	} else {
		ev.Manifest = in.Manifest
		ev.Msg = audit.Cap("no policy is loaded: every connection is refused (manifest_not_loaded): "+d.Registry.NotLoaded(in.Manifest), 1000)
	}
	d.Audit.Write(ev)
	return nil
}

// peerRefused records a local process refused by a unix listener's
// allowed_peers: an attempt like any other, so it is in the audit log.
func (d *Daemon) peerRefused(in policy.Integration, uid, gid uint32) {
	ev := audit.Event{Kind: audit.Connect, Decision: "deny", Reason: string(policy.OperatorDenied), Listener: in.Listen,
		Rule: "allowed_peers", Msg: fmt.Sprintf("peer uid %d gid %d is not in allowed_peers", uid, gid)}
	if p := d.Registry.Policy(in.Manifest); p != nil {
		ev = p.Identify(ev)
		ev.Generation = p.Generation
	}
	if d.Suppress != nil {
		d.Suppress.Write(ev)
		return
	}
	d.Audit.Write(ev)
}

func listenerAddr(ln net.Listener) string {
	if ln.Addr().Network() == "unix" {
		return "unix:" + ln.Addr().String()
	}
	return ln.Addr().String()
}

// Listeners returns each integration's bound address, port 0 resolved.
func (d *Daemon) Listeners() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]string{}
	for k, l := range d.listeners {
		out[k] = l.real
	}
	return out
}

// Reload re-reads the config and every manifest. A broken config keeps the
// whole last good state; a broken manifest keeps its last good policy; a
// config that changes a setting only a restart can apply is refused, and
// the message names it. Limits, timeouts and audit.on_failure apply at
// once. Listeners of added integrations open, those of removed ones close
// (drained without holding d.mu), and every open tunnel is re-judged
// against its new policy.
func (d *Daemon) Reload(ctx context.Context) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	if d.stopping.Load() {
		return errStopping
	}
	cfg, err := d.LoadConfig()
	if err == nil {
		err = needsRestart(d.Config(), cfg)
	}
	if err != nil {
		d.Audit.Write(audit.Event{Kind: audit.Policy, Action: "config_refused", Err: audit.Cap(err.Error(), 1000), Msg: "the last good configuration stays in force"})
		d.Metrics.Reloads.WithLabelValues("", "config_refused").Inc()
		return err
	}
	outs := d.Registry.LoadContext(ctx, cfg)
	d.followNAT64(cfg)
	if d.stopping.Load() {
		return errStopping
	}
	d.announceDenyWithdrawn(policy.DenyWithdrawn(d.Config().Deny, cfg.Deny))
	d.auditOutcomes(outs)
	d.announceExemptions()
	d.mu.Lock()
	if d.stopping.Load() { // Shutdown began while the files were read
		d.mu.Unlock()
		return errStopping
	}
	d.cfg = cfg
	d.Gate.SetMax(d.maxConnections(cfg.Limits))
	d.Resolver.SetTimeout(cfg.Timeouts.DNS)
	var closing []closingListener
	for key, l := range d.listeners {
		if !stillConfigured(cfg, key, l.addr) {
			delete(d.listeners, key)
			l.server.StopAccepting() // its address is free for a listener opened below
			closing = append(closing, closingListener{key, l})
		}
	}
	var errs []error
	for _, in := range cfg.Integrations {
		if _, open := d.listeners[in.Manifest]; open {
			continue // one whose manifest never loaded stays open, refusing (manifest_not_loaded)
		}
		if err := d.open(ctx, in); err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range d.listeners {
		l.server.Apply(cfg.Limits, cfg.Timeouts, cfg.Audit.OnFailure)
		l.server.Redecide()
	}
	d.mu.Unlock()
	d.closeListeners(ctx, cfg.Timeouts.Drain, closing)
	d.warnWritableManifests(ctx, cfg)
	d.warnSharedCap(cfg)
	return errors.Join(errs...)
}

var errStopping = errors.New("egressd is stopping")

type closingListener struct {
	key string
	l   *listener
}

// maxConnections is the global cap a config asks for.
func (d *Daemon) maxConnections(l policy.Limits) int {
	switch {
	case l.MaxConnections > 0:
		return l.MaxConnections
	case d.DerivedMaxConnections > 0:
		return d.DerivedMaxConnections
	}
	return int(d.Gate.Max())
}

// Config is the configuration in force: the last one that loaded.
func (d *Daemon) Config() policy.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

func stillConfigured(cfg policy.Config, key, addr string) bool {
	for _, in := range cfg.Integrations {
		if in.Manifest == key && in.Listen == addr {
			return true
		}
	}
	return false
}

// closeListeners drains the listeners of removed integrations, together,
// for up to drain.
func (d *Daemon) closeListeners(ctx context.Context, drain time.Duration, closing []closingListener) {
	ctx, cancel := context.WithTimeout(ctx, drain)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range closing {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.l.server.Redecide() // its policy is gone: every tunnel is policy_narrowed
			c.l.server.Shutdown(ctx)
			d.Resolver.Forget(c.key)
			d.Audit.Write(audit.Event{Kind: audit.Lifecycle, Action: "closed", Listener: c.l.real, Msg: "integration removed from the config"})
		}()
	}
	wg.Wait()
}

// Shutdown stops accepting on every listener, drains open tunnels until the
// drain timeout, closes the rest, and writes the audit chain's clean end.
// It returns the audit log's close error (a last write that failed, or a
// run link that could not record the end: audit.LinkError), so serve does
// not exit 0 over a chain whose end no one can find.
//
// It never waits for a reload in progress: a reload stuck reading a file
// finds, when it returns, that egressd is stopping, and changes nothing.
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.stopping.Store(true)
	d.ready.Store(false)
	d.Audit.Write(audit.Event{Kind: audit.Lifecycle, Action: "drain", Msg: fmt.Sprintf("draining open tunnels for up to %s", d.Config().Timeouts.Drain)})
	d.closeAll()
	if d.Suppress != nil {
		d.Suppress.Flush(true)
	}
	d.Audit.Write(audit.Event{Kind: audit.Lifecycle, Action: "stop"})
	return d.Audit.Close()
}

// closeAll closes every listener, draining them together.
func (d *Daemon) closeAll() {
	d.mu.Lock()
	listeners := d.listeners
	d.listeners = map[string]*listener{}
	drain := d.cfg.Timeouts.Drain
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	var wg sync.WaitGroup
	for _, l := range listeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if n := l.server.Shutdown(ctx); n > 0 {
				d.Audit.Write(audit.Event{Kind: audit.Lifecycle, Action: "drain_deadline", Listener: l.real, Msg: fmt.Sprintf("closed %d tunnels still open at the drain deadline", n)})
			}
		}()
	}
	wg.Wait()
}

// Ready reports whether every listener is up, every policy loaded and the
// audit log writable (unless the operator chose on_failure: continue), with
// the reason when it is not.
func (d *Daemon) Ready() (bool, string) {
	if !d.ready.Load() {
		return false, "starting or stopping"
	}
	// Every reason is named, not the first only: a hostile integration
	// whose manifest is not loaded must not hide that its link also
	// stopped a file watch.
	var why []string
	d.mu.Lock()
	for _, in := range d.cfg.Integrations {
		if d.listeners[in.Manifest] == nil {
			why = append(why, "integration not serving: "+in.Manifest)
		} else if d.Registry.Policy(in.Manifest) == nil {
			why = append(why, "integration not loaded, its listener refuses every connection (manifest_not_loaded): "+d.Registry.NotLoadedToClient(in.Manifest)) // /readyz is reachable by the app (a sidecar's loopback)
		}
	}
	onFailure := d.cfg.Audit.OnFailure
	d.mu.Unlock()
	if stuck := d.Registry.StuckReads(); len(stuck) > 0 {
		sort.Strings(stuck)
		why = append(why, "manifest read not finished (the last good policy stays in force): "+strings.Join(stuck, ", "))
	}
	if stuck := StuckWatches(); len(stuck) > 0 {
		sort.Strings(stuck)
		why = append(why, "file watch not answering (changes there are not followed until it returns; every other file is): "+strings.Join(stuck, ", "))
	}
	if !d.Audit.Healthy() && onFailure == policy.DenyOnAuditFailure {
		why = append(why, "audit log unavailable: new connections are refused")
	}
	if _, err := d.Registry.HostAddrs().Addrs(); err != nil {
		why = append(why, "the host's own addresses are unknown: every address is refused ("+err.Error()+")")
	}
	if len(why) > 0 {
		return false, strings.Join(why, "; ")
	}
	return true, "ok"
}

func (d *Daemon) auditOutcomes(outs []policy.Outcome) {
	for _, o := range outs {
		ev := audit.Event{Kind: audit.Policy, Integration: o.ID, IntegrationVersion: o.Version, Generation: o.Generation,
			Action: string(o.Result), Pending: o.Pending, Manifest: o.Key, Msg: audit.Cap(strings.Join(o.Warnings, "; "), 1000)}
		ev.Claim = d.Registry.Policy(o.Key).Claim() // the policy in force: a claim kept last good is still the claim
		// The list in force: what a report judges this period's traffic by.
		ev.Entries = d.Registry.Policy(o.Key).InForceEntries()
		if ev.Entries == nil {
			// Nothing is in force (a manifest that never loaded). An
			// absent list means a log from an egressd that did not record
			// lists, which a report judges by the manifest file instead.
			ev.Entries = []string{}
		}
		if o.Err != nil {
			ev.Err = audit.Cap(o.Err.Error(), 1000)
		}
		switch {
		case o.Result != policy.Failed || d.Warn == nil:
		case d.Registry.Policy(o.Key) == nil:
			d.Warn(fmt.Sprintf("%s: %s; its listener refuses every connection (manifest_not_loaded) until a reload loads it", o.Key, termsafe.OneLine(errText(o.Err))))
		default:
			// Another entry of the same manifest serves it (a manifests:
			// folder and an explicit entry for one of its folders): this
			// entry is left out, and the journal must say so (round 35:
			// only an audit line without an integration said it).
			d.Warn(fmt.Sprintf("reload: %s: %s; this entry is refused and the entry already serving it stays as it is", o.Key, termsafe.OneLine(errText(o.Err))))
		}
		if o.Result == policy.KeptLastGood && d.Warn != nil {
			// The journal must say it too: the operator's narrowing with a
			// typo leaves the wider list in force.
			d.Warn(fmt.Sprintf("reload: %s: %s; the last good policy (%s %s) stays in force", o.Key, termsafe.OneLine(errText(o.Err)), o.ID, o.Version))
		}
		if o.Notice != "" { // a widening or id change waits for the operator, or widen: auto let it in
			ev.Msg = audit.Cap(strings.Join(append(o.Warnings, o.Notice), "; "), 1000)
			if d.Warn != nil && d.noticed[o.Key] != o.Notice {
				d.Warn(o.Notice)
			}
		}
		if d.noticed == nil {
			d.noticed = map[string]string{}
		}
		d.noticed[o.Key] = o.Notice
		d.Audit.Write(ev)
		d.Metrics.Reloads.WithLabelValues(o.ID, string(o.Result)).Inc()
	}
}

// announceExemptions warns about every named exemption that came into
// force since it last ran, on stderr, in the audit log and in /metrics,
// and withdraws those no longer in force: a reload widens nothing
// silently. It reads the policies in force, not the config, so a refused
// entry's exemptions are never announced. d.mu is held.
func (d *Daemon) announceExemptions() {
	now := map[exemptionKey]bool{}
	for _, p := range d.Registry.Snapshot().Policies {
		who := p.Identify(audit.Event{})
		for _, name := range p.Loosenings() {
			now[exemptionKey{who.Integration, who.Claim, name}] = true
		}
	}
	for _, k := range sortedKeys(now) {
		if !d.announced[k] {
			d.exemptionEvent(k, "exemption", "exemption in force for %s: %s", now)
		}
	}
	for _, k := range sortedKeys(d.announced) {
		if !now[k] {
			d.exemptionEvent(k, "exemption_withdrawn", "exemption withdrawn for %s: %s", now)
		}
	}
	d.announced = now
}

// exemptionKey is one exemption in force for one integration; an
// unapproved claim of its id (policy.Policy.Claim) is apart from it.
type exemptionKey struct{ id, claim, name string }

// who names k's integration for a person.
func (k exemptionKey) who() string {
	if k.claim != "" {
		return k.id + " (unapproved claim from " + k.claim + ")"
	}
	return k.id
}

// announceDenyWithdrawn warns about each operator denial a reload removed,
// on stderr and in the audit log: the targets it held back now pass.
func (d *Daemon) announceDenyWithdrawn(sentences []string) {
	for _, msg := range sentences {
		d.Audit.Write(audit.Event{Kind: audit.Lifecycle, Action: "deny_withdrawn", Msg: msg})
		if d.Warn != nil {
			d.Warn(msg)
		}
	}
}

// exemptionEvent announces k coming into force or going; the metric,
// labelled by id, is 1 while any of the id's folders has the exemption.
func (d *Daemon) exemptionEvent(k exemptionKey, action, format string, now map[exemptionKey]bool) {
	msg := fmt.Sprintf(format, termsafe.OneLine(k.who()), k.name)
	gauge := 0.0
	for o := range now {
		if o.id == k.id && o.name == k.name {
			gauge = 1
		}
	}
	d.Metrics.Exemptions.WithLabelValues(k.id, k.name).Set(gauge)
	d.Audit.Write(audit.Event{Kind: audit.Lifecycle, Action: action, Integration: k.id, Claim: k.claim, Exemption: k.name, Msg: msg})
	if d.Warn != nil {
		d.Warn(msg)
	}
}

func sortedKeys(m map[exemptionKey]bool) []exemptionKey {
	out := make([]exemptionKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.id+"\x00"+a.claim+"\x00"+a.name < b.id+"\x00"+b.claim+"\x00"+b.name
	})
	return out
}

// NewPromRegistry returns a Prometheus registry with the Go and process
// collectors, for the admin endpoint.
func NewPromRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

func errText(err error) string {
	if err == nil {
		return "refused"
	}
	return err.Error()
}

// manifestReadTimeout is cfg's timeouts.manifest_read, or its default.
func manifestReadTimeout(cfg policy.Config) time.Duration {
	if cfg.Timeouts.ManifestRead > 0 {
		return cfg.Timeouts.ManifestRead
	}
	return policy.DefaultManifestRead
}
