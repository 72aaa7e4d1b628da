package policy

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/egressd/egressd/allowlist"
)

// Snapshot is one generation: every integration's policy, keyed by the
// integration's manifest path as configured. It is immutable.
type Snapshot struct {
	Generation uint64
	Policies   map[string]*Policy
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
	Pending    string   // the pending version, with Result Pending
	Warnings   []string // manifest warnings, "path: message"
	Err        error    // why the manifest was refused
}

// Registry holds the policies of many integrations as numbered generations,
// swapped atomically. Loads are serialised; readers never block.
type Registry struct {
	memory *Memory
	host   *HostAddrs

	mu      sync.Mutex // serialises Load
	current atomic.Pointer[Snapshot]
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

// Load reads every integration's manifest under cfg and publishes a new
// generation. A manifest that is invalid, missing or refused by the version
// rules keeps its last good policy; one with no last good policy is left
// out (Failed). Integrations no longer in cfg are dropped (Removed).
func (r *Registry) Load(cfg Config) []Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.current.Load()
	next := &Snapshot{Generation: prev.Generation + 1, Policies: map[string]*Policy{}}
	var outs []Outcome
	ids := map[string]string{} // id -> key, to refuse duplicates
	for _, in := range cfg.Integrations {
		out := r.loadOne(cfg, in, prev.Policies[in.Manifest], ids, next.Generation)
		if out.Result != Failed {
			p := out.policy
			ids[p.Manifest.ID] = in.Manifest
			next.Policies[in.Manifest] = p
		}
		outs = append(outs, out.Outcome)
	}
	for key, p := range prev.Policies {
		if _, ok := next.Policies[key]; !ok && !configured(cfg, key) {
			outs = append(outs, Outcome{Key: key, ID: p.Manifest.ID, Version: p.Manifest.Version, Generation: next.Generation, Result: Removed})
		}
	}
	r.current.Store(next)
	return outs
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

func (r *Registry) loadOne(cfg Config, in Integration, last *Policy, ids map[string]string, gen uint64) loadResult {
	out := loadResult{Outcome: Outcome{Key: in.Manifest, Generation: gen}}
	refuse := func(err error) loadResult {
		out.Err = err
		out.Result = Failed
		if last != nil {
			out.Result = KeptLastGood
			out.ID, out.Version = last.Manifest.ID, last.Manifest.Version
			out.policy = r.rebuild(cfg, in, last, gen)
		}
		return out
	}
	m, file, ps, err := allowlist.Load(in.Manifest, &cfg.Rules)
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
	if last != nil && last.Manifest.ID != m.ID {
		return refuse(fmt.Errorf("id changed from %s to %s at the same path; an id is immutable", last.Manifest.ID, m.ID))
	}
	if other, dup := ids[m.ID]; dup {
		return refuse(fmt.Errorf("id %s is already served from %s; ids must be unique", m.ID, other))
	}
	var adm admission
	err = r.memory.Update(m.ID, func(rec *Record, known bool) error {
		var err error
		adm, err = admit(rec, known, m, in)
		return err
	})
	if err != nil {
		return refuse(err)
	}
	p := NewPolicy(m, adm.inForce, r.options(cfg, in))
	p.ManifestAt, p.Generation, p.Pending = file, gen, adm.pending
	out.policy = p
	switch {
	case adm.pending != "":
		out.Result, out.Pending = Pending, adm.pending
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
func (r *Registry) rebuild(cfg Config, in Integration, last *Policy, gen uint64) *Policy {
	p := NewPolicy(last.Manifest, last.Entries(), r.options(cfg, in))
	p.ManifestAt, p.Generation, p.Pending = last.ManifestAt, gen, last.Pending
	return p
}

func (r *Registry) options(cfg Config, in Integration) PolicyOptions {
	return PolicyOptions{Exemptions: in.Exemptions, Deny: cfg.Deny, NAT64: cfg.NAT64, Host: r.host}
}

func sameEntries(a, b []allowlist.Entry) bool {
	return len(a) == len(b) && !widens(a, b)
}
