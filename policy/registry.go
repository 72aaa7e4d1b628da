package policy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/internal/bounded"
)

// Snapshot is one generation: every integration's policy, keyed by the
// integration's manifest path as configured. It is immutable.
type Snapshot struct {
	Generation uint64
	Policies   map[string]*Policy
	listen     map[string]string // key -> the listener of the entry that serves it
	// notLoaded says, for each configured key with no policy, why: "path:
	// message", for the operator, and the class its listener's refusals
	// name to the integration's clients.
	notLoaded map[string]notLoadedWhy
}

// Result says what a load did with one integration.
type Result string

const (
	Loaded       Result = "loaded"         // a new or changed policy applies
	Unchanged    Result = "unchanged"      // the same list as before
	Pending      Result = "pending"        // a widening waits for approval; the last approved list applies
	KeptLastGood Result = "kept_last_good" // refused; the last good policy stays in force
	Failed       Result = "failed"         // refused, and there is no last good policy
	Removed      Result = "removed"        // the operator removed the integration
)

// Outcome reports one integration's load, for the policy audit event.
type Outcome struct {
	Key        string // manifest path as configured
	ID         string
	Version    string
	Generation uint64
	Result     Result
	Pending    string   // the pending version, with Result Pending; "ID VERSION" for an id change (Policy.PendingChange)
	Warnings   []string // manifest warnings, "path: message"
	Notice     string   // what waits and the command that approves it, or a widening widen: auto let in
	Err        error    // why the manifest was refused
}

// Registry holds the policies of many integrations as numbered generations,
// swapped atomically. Loads are serialised; readers never block.
type Registry struct {
	memory *Memory
	host   *HostAddrs

	mu      sync.Mutex // serialises Load
	current atomic.Pointer[Snapshot]
	// reads bounds each manifest read (timeouts.manifest_read): a path
	// into a file system that never answers keeps its integration's last
	// good policy instead of freezing every load, and is not read again
	// until that read returns.
	reads       bounded.Reads
	readTimeout atomic.Int64 // the last load's timeouts.manifest_read
}

// NewRegistry returns an empty registry. memory may be InMemory() for tools
// that must not write state; localAddrs are the host's interface addresses.
func NewRegistry(memory *Memory, localAddrs []netip.Addr) *Registry {
	r := &Registry{memory: memory, host: NewHostAddrs(localAddrs)}
	r.current.Store(&Snapshot{Policies: map[string]*Policy{}})
	return r
}

// HostAddrs is the host's addresses every policy of r judges by; updating
// it applies to every policy at once, without a reload.
func (r *Registry) HostAddrs() *HostAddrs { return r.host }

// Snapshot returns the current generation.
func (r *Registry) Snapshot() *Snapshot { return r.current.Load() }

// Policy returns the current policy for key, or nil.
func (r *Registry) Policy(key string) *Policy { return r.current.Load().Policies[key] }

// NotLoaded says why a configured key has no policy ("path: message"), or
// "" when it has one or is not configured.
func (r *Registry) NotLoaded(key string) string { return r.current.Load().notLoaded[key].full }

// NotLoadedToClient is what the integration's own clients are told of why
// key has no policy ("" if it has one): its class and where the operator
// reads the rest, never the message (see notLoadedFor).
func (r *Registry) NotLoadedToClient(key string) string {
	return r.current.Load().notLoaded[key].toClient
}

// StuckReads are the manifests whose read has outlived its deadline and
// still not returned: each keeps its last good policy, or none.
func (r *Registry) StuckReads() []string {
	return r.reads.Stuck(time.Duration(r.readTimeout.Load()))
}

// ErrIDServedTwice refuses an entry whose id another entry serves, when
// version memory cannot tell which of them the id is (see
// startClaimNotice). At start it stops egressd, as before: which entry
// came first in the config must not decide who gets an id.
var ErrIDServedTwice = errors.New("ids must be unique")

// StopsStart reports whether o, an outcome of the load at start, stops
// egressd from serving anyone. Only what is the operator's does: a
// manifest configured by two entries, or an id two entries declare that
// version memory cannot place (ErrIDServedTwice). A manifest that does not
// load is its author's doing, and stops only its own integration, which
// refuses every connection (ManifestNotLoaded) until a reload loads it.
func (o Outcome) StopsStart(cfg Config) bool {
	if o.Result != Failed {
		return false
	}
	entries := 0
	for _, in := range cfg.Integrations {
		if in.Manifest == o.Key {
			entries++
		}
	}
	return entries > 1 || errors.Is(o.Err, ErrIDServedTwice)
}

// Load is LoadContext without a context, for tools that read one manifest
// and stop.
func (r *Registry) Load(cfg Config) []Outcome { return r.LoadContext(context.Background(), cfg) }

// LoadContext reads every integration's manifest under cfg and publishes
// a new generation. A manifest that is invalid, missing, refused by the
// version rules or not read within timeouts.manifest_read keeps its last
// good policy; one with no last good policy is left out (Failed) and
// NotLoaded says why. Integrations no longer in cfg are dropped (Removed).
// The manifests are read together, each on its own goroutine, so the
// load waits at most one deadline however many of them do not answer;
// when ctx ends, the reads still running count as not finished.
func (r *Registry) LoadContext(ctx context.Context, cfg Config) []Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.current.Load()
	next := &Snapshot{Generation: prev.Generation + 1, Policies: map[string]*Policy{}, listen: map[string]string{}, notLoaded: map[string]notLoadedWhy{}}
	var outs []Outcome
	ids := map[string]string{} // id -> key, to refuse duplicates
	for id, key := range servedIDs(prev, cfg) {
		ids[id] = key
	}
	serves := servingEntries(cfg, prev)
	reads := r.readAll(ctx, cfg, serves)
	before, beforeErr := r.memory.Read() // who held each id before this load (boundElsewhere)
	if beforeErr != nil {
		before = *newState()
	}
	outs = make([]Outcome, len(cfg.Integrations))
	for _, i := range loadOrder(cfg, reads, &before) {
		in := cfg.Integrations[i]
		if w := serves[in.Manifest]; w != i {
			// A duplicate entry for a served manifest is refused whole:
			// its listener and its exemptions change nothing.
			outs[i] = Outcome{Key: in.Manifest, Generation: next.Generation, Result: Failed,
				Err: fmt.Errorf("this manifest is already served on %s; one manifest is served by one config entry", cfg.Integrations[w].Listen)}
			continue
		}
		out := r.loadOne(cfg, in, reads[in.Manifest], prev.Policies[in.Manifest], ids, &before, next.Generation)
		if out.Result == Failed {
			next.notLoaded[in.Manifest] = notLoadedFor(in.Manifest, out.Err)
		}
		if out.Result != Failed {
			p := out.policy
			// The id in force, not the manifest's: a folder whose rename
			// waits still serves its old id, and a second entry must not
			// serve it beside it. A pending claim holds no id.
			if id, holds := holdsID(p); holds {
				if other, dup := ids[id]; dup && other != in.Manifest {
					out = r.refuseDuplicate(cfg, in, prev.Policies[in.Manifest], ids, next.Generation,
						fmt.Errorf("id %s is in force for %s and already served from %s; %w", id, in.Manifest, other, ErrIDServedTwice))
					if out.Result == Failed {
						next.notLoaded[in.Manifest] = notLoadedFor(in.Manifest, out.Err)
						outs[i] = out.Outcome
						continue
					}
					p = out.policy
					id, _ = p.InForce()
				}
				ids[id] = in.Manifest
			}
			next.Policies[in.Manifest] = p
			next.listen[in.Manifest] = in.Listen
		}
		outs[i] = out.Outcome
	}
	for key, p := range prev.Policies {
		if _, ok := next.Policies[key]; !ok && !configured(cfg, key) {
			outs = append(outs, Outcome{Key: key, ID: p.Manifest.ID, Version: p.Manifest.Version, Generation: next.Generation, Result: Removed})
		}
	}
	r.current.Store(next)
	return outs
}

// sharedIDRefused refuses, alone, an entry whose folder moved to id by an
// id change or claim the operator approved, when another entry of the
// config serves id: one serve serves an id from one entry, and the
// operator's approval must not stop the other's service (round 51).
func sharedIDRefused(id, servedFrom string) error {
	return fmt.Errorf("the operator approved this folder's move to the id %s, but %s serves %s in this config, and one serve serves an id from one entry: nothing is allowed for this entry; serve the two folders from separate serve processes, or take one of them out of this config", id, servedFrom, id)
}

// loadOrder is the order LoadContext loads cfg's entries in: first those
// whose folder version memory binds to the id their manifest declares on
// its own right (by loading it first), then those it binds to it by an
// approved id change or claim, then the rest, each group in config order.
// An entry whose folder moved to an id, or moves to it, thus finds the
// id's own folder served before it, whichever comes first in the config
// (round 51: once F's change to the id G serves was approved, a config
// listing F first stopped every start, G's service with it).
func loadOrder(cfg Config, reads map[string]manifestRead, before *State) []int {
	var own, approved, rest []int
	for i, in := range cfg.Integrations {
		read := reads[in.Manifest]
		var f Folder
		if read.m != nil {
			f = before.Folders[ManifestPlace(read.file)]
		}
		switch {
		case read.m == nil || f.ID != read.m.ID:
			rest = append(rest, i)
		case f.ByApproval:
			approved = append(approved, i)
		default:
			own = append(own, i)
		}
	}
	return append(append(own, approved...), rest...)
}

// refuseDuplicate refuses a load whose id in force another entry already
// serves: the last good policy stays if its own id in force is free, as
// for any refused reload; otherwise the entry is left out (Failed).
func (r *Registry) refuseDuplicate(cfg Config, in Integration, last *Policy, ids map[string]string, gen uint64, err error) loadResult {
	out := loadResult{Outcome: Outcome{Key: in.Manifest, Generation: gen, Result: Failed, Err: err}}
	if last == nil {
		return out
	}
	id, version := last.InForce()
	if other, dup := ids[id]; dup && other != in.Manifest {
		return out
	}
	out.Result, out.ID, out.Version = KeptLastGood, id, version
	out.policy = r.rebuild(cfg, in, last, gen)
	return out
}

// servingEntries picks, for each manifest key in cfg, the index of the one
// entry that serves it: the entry on the listener that served it before,
// else the first.
func servingEntries(cfg Config, prev *Snapshot) map[string]int {
	out := map[string]int{}
	for i, in := range cfg.Integrations {
		w, seen := out[in.Manifest]
		if !seen || (prev.listen[in.Manifest] == in.Listen && cfg.Integrations[w].Listen != in.Listen) {
			out[in.Manifest] = i
		}
	}
	return out
}

// servedIDs are the ids prev served from keys cfg still configures: on a
// reload, an entry that claims one of them from another key is the
// duplicate, whatever its place in the config.
func servedIDs(prev *Snapshot, cfg Config) map[string]string {
	out := map[string]string{}
	for key, p := range prev.Policies {
		if id, holds := holdsID(p); holds && configured(cfg, key) {
			out[id] = key
		}
	}
	return out
}

// holdsID returns the id p serves under: the manifest's, except while an id
// change waits (a rename that waits does not hold its new id), and none
// while p's folder claims an id bound elsewhere (a claim holds nothing, so
// the id's own folder still loads after it).
func holdsID(p *Policy) (string, bool) {
	if p.Pending != "" && p.PendingIDFrom == "" && (len(p.PendingClaimOf) > 0 || p.PendingUnbound) {
		return "", false
	}
	id, _ := p.InForce()
	return id, true
}

func configured(cfg Config, key string) bool {
	for _, in := range cfg.Integrations {
		if in.Manifest == key {
			return true
		}
	}
	return false
}

type loadResult struct {
	Outcome
	policy *Policy
}

// manifestRead is what reading one integration's manifest gave.
type manifestRead struct {
	m    *allowlist.Manifest
	file string
	ps   allowlist.Problems
	err  error
}

// readAll reads the manifest of each serving entry, together, each within
// timeouts.manifest_read (see Registry.reads).
func (r *Registry) readAll(ctx context.Context, cfg Config, serves map[string]int) map[string]manifestRead {
	timeout := cfg.Timeouts.ManifestRead
	if timeout <= 0 {
		timeout = DefaultManifestRead
	}
	r.readTimeout.Store(int64(timeout))
	out := make(map[string]manifestRead, len(serves))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for key, i := range serves {
		in := cfg.Integrations[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			read, err := bounded.Run(ctx, &r.reads, key, timeout, func() manifestRead { return readManifest(in, &cfg.Rules) })
			if err != nil {
				read = manifestRead{err: err}
			}
			mu.Lock()
			out[key] = read
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// readManifest reads and parses in's manifest: the file I/O of a load.
func readManifest(in Integration, rules *allowlist.Rules) manifestRead {
	var read manifestRead
	if in.Folder != nil {
		read.m, read.file, read.ps, read.err = allowlist.LoadIn(in.Folder, in.Manifest, rules)
	} else {
		read.m, read.file, read.ps, read.err = allowlist.Load(in.Manifest, rules)
	}
	return read
}

func (r *Registry) loadOne(cfg Config, in Integration, read manifestRead, last *Policy, ids map[string]string, before *State, gen uint64) loadResult {
	out := loadResult{Outcome: Outcome{Key: in.Manifest, Generation: gen}}
	refuse := func(err error) loadResult {
		out.Err = err
		out.Result = Failed
		if last != nil {
			out.Result = KeptLastGood
			out.ID, out.Version = last.InForce()
			out.policy = r.rebuild(cfg, in, last, gen)
		}
		return out
	}
	m, file, ps, err := read.m, read.file, read.ps, read.err
	if err != nil {
		return refuse(err)
	}
	for _, w := range ps.Warnings() {
		out.Warnings = append(out.Warnings, w.String())
	}
	if m == nil {
		return refuse(ps.Errors())
	}
	out.ID, out.Version = m.ID, m.Version
	dupOf := ""
	if other, dup := ids[m.ID]; dup && other != in.Manifest {
		place := ManifestPlace(file)
		switch f := before.Folders[place]; {
		case last == nil && f.ID == m.ID && f.ByApproval:
			return refuse(sharedIDRefused(m.ID, other))
		case last != nil || (len(before.boundElsewhere(m.ID, place)) == 0 && !movesToID(before, place, m.ID)):
			return refuse(fmt.Errorf("id %s is already served from %s; %w", m.ID, other, ErrIDServedTwice))
		}
		dupOf = other // at start: a claim of another entry's id, which waits (startClaim)
	}
	// A binding the new version no longer allows is refused before the
	// version memory records it; then again against the list in force.
	if _, err := BindSecrets(m, m.Entries, in.PassedEnv, in.Secrets); err != nil {
		return refuse(err)
	}
	var adm admission
	err = r.memory.update(func(s *State) error {
		var err error
		adm, err = admitAt(s, Places(file, in.Listen), m, in, r.memory.commandDir())
		if err == nil && dupOf != "" && adm.pending == "" {
			// The operator approved this folder's move to the id, but one
			// serve serves an id from one entry: this entry is refused,
			// alone (round 51: the whole serve refused to start).
			err = sharedIDRefused(m.ID, dupOf)
		}
		return err
	})
	if err != nil {
		return refuse(fmt.Errorf("%w (version memory: %s)", err, r.memory.where()))
	}
	opts := r.options(cfg, in)
	opts.WidenAuto = adm.widenAuto
	if opts.Secrets, err = BindSecrets(m, adm.inForce, in.PassedEnv, in.Secrets); err != nil {
		return refuse(err)
	}
	if dupOf != "" {
		adm.inForce = []allowlist.Entry{} // nothing for a folder that took a served id
	}
	p := NewPolicy(m, adm.inForce, opts)
	p.ManifestAt, p.Generation, p.StateDir = file, gen, r.memory.commandDir()
	p.setPending(adm.pending, adm.idFrom, adm.claimOf, adm.unbound)
	p.PendingIDFromVersion, p.PendingKeptVersion, p.GateWithheld = adm.fromVer, adm.keptVer, adm.withheld
	p.PendingOutdated = adm.outdated && adm.pending != ""
	out.Notice = p.PendingNotice()
	if dupOf != "" {
		out.Notice = startClaimNotice(p, dupOf)
	}
	if adm.released != "" {
		out.Notice = adm.released
	}
	out.policy = p
	switch {
	case adm.pending != "":
		out.Result, out.Pending = Pending, adm.pending
		// Nothing is the waiting version's until approved: the event is
		// the version in force's, with what waits in Pending (round 40: a
		// waiting widening's event named it as the version run).
		out.ID, out.Version = p.InForce()
		if p.PendingIDFrom != "" {
			out.Pending = p.PendingChange() // the old id's event, with the change it waits for
		}
	case last != nil && sameEntries(last.Entries(), p.Entries()) && last.Manifest.Version == m.Version:
		out.Result = Unchanged
	default:
		out.Result = Loaded
	}
	return out
}

// rebuild keeps last's manifest and entries but takes the operator's
// current limits and exemptions: config changes apply even while a
// manifest is broken.
// StartProblems are the problems that would stop "egressd serve" from
// starting with cfg, found without version memory: a manifest that does not
// load, an id served twice, a manifest configured twice.
func StartProblems(cfg Config) []error {
	var errs []error
	for _, o := range NewRegistry(InMemory(), nil).Load(cfg) {
		if o.Result == Failed {
			errs = append(errs, fmt.Errorf("%s: %v", o.Key, o.Err))
		}
	}
	return errs
}

func (r *Registry) rebuild(cfg Config, in Integration, last *Policy, gen uint64) *Policy {
	opts := r.options(cfg, in)
	opts.WidenAuto = opts.WidenAuto && last.widenAuto // withheld at the last load: still withheld
	var err error
	if opts.Secrets, err = BindSecrets(last.Manifest, last.Entries(), in.PassedEnv, in.Secrets); err != nil {
		opts.Secrets = last.Secrets() // the last good bindings, as the last good list
	}
	p := NewPolicy(last.Manifest, last.Entries(), opts)
	p.ManifestAt, p.Generation, p.StateDir = last.ManifestAt, gen, last.StateDir
	p.setPending(last.Pending, last.PendingIDFrom, last.PendingClaimOf, last.PendingUnbound)
	p.PendingIDFromVersion, p.PendingKeptVersion, p.GateWithheld = last.PendingIDFromVersion, last.PendingKeptVersion, last.GateWithheld
	p.PendingOutdated = last.PendingOutdated
	return p
}

func (r *Registry) options(cfg Config, in Integration) PolicyOptions {
	return PolicyOptions{Exemptions: in.Exemptions, WidenAuto: in.Widen == WidenAuto, Deny: cfg.Deny, NAT64: cfg.NAT64, Host: r.host}
}

func sameEntries(a, b []allowlist.Entry) bool {
	return len(a) == len(b) && !widens(a, b)
}

// At start there is no last good policy to keep when an entry's manifest
// declares the id another entry serves (a reload keeps the last good one).
// Refusing to start would let one integration's author take every
// integration down; so when version memory binds the id to a folder other
// than this entry's, the entry that holds it keeps it and this one waits as
// a pending claim or id change, with nothing allowed. Only when memory
// cannot tell them apart (the id bound to no folder, or to this one) does
// the start fail. Memory is read as it was before the load: the first
// entry's own load must not decide that the second one is the claim.

// movesToID reports whether s holds place as moving to id: bound to
// another id (an id change), or holding a change or claim to id. Such an
// entry is not bound to id, so at start another entry serving id makes it
// wait with nothing allowed, not the whole serve refuse to start (round
// 30, s4b): the refusal is for entries both bound to one id.
func movesToID(s *State, place, id string) bool {
	f := s.Folders[place]
	return (f.ID != "" && f.ID != id) || (f.Pending != nil && f.Pending.ID == id)
}

// startClaimNotice is PendingNotice for such an entry.
func startClaimNotice(p *Policy, servedFrom string) string {
	return fmt.Sprintf("%s declares the id %s %s, which version memory binds to another folder and %s serves; nothing is allowed for this entry until the operator approves it (%s) or its manifest's id is restored",
		p.ManifestAt, p.Manifest.ID, p.Manifest.Version, servedFrom, p.ApproveCommand())
}
