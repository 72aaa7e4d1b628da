package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egressd/egressd/allowlist"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/miekg/dns"
	"golang.org/x/sync/singleflight"
)

// Answer is what a name resolved to: the first maxAddrsPerFamily A and
// AAAA addresses, in the answer's order (A first, which is the dial order),
// and the CNAME chain followed to get there.
type Answer struct {
	Addrs  []netip.Addr
	CNAMEs []string
}

// Resolver resolves allowlisted names with miekg/dns: fully qualified names
// only (no search list, no /etc/hosts), validated answers, TCP fallback on
// truncation, EDNS0 at 1232 bytes, and CNAME chains followed by owner name.
//
// Raw answers are cached (TTL clamped to [0, MaxTTL]) behind singleflight
// in bounded LRUs, one share per integration: an integration that
// resolves a flood of random names under its own wildcard evicts only its
// own entries, never another's. Verdicts are never cached: the caller
// checks every address on every connection.
type Resolver struct {
	// Servers are upstream resolvers, host:port, tried in order.
	Servers []string
	// Timeout bounds one resolution, every server and retry included.
	Timeout time.Duration
	// Now is the clock for the cache; nil means time.Now.
	Now func() time.Time
	// Observe, if set, is told each upstream query's duration (for metrics).
	Observe func(time.Duration)

	mu      sync.Mutex
	caches  map[string]*lru.Cache[string, cached] // one share per integration
	group   singleflight.Group
	reloadT atomic.Int64 // a reloaded timeouts.dns, 0 if none
}

// SetTimeout changes Timeout while resolutions run (a reload).
func (r *Resolver) SetTimeout(d time.Duration) {
	if r != nil {
		r.reloadT.Store(int64(d))
	}
}

func (r *Resolver) timeout() time.Duration {
	if t := r.reloadT.Load(); t > 0 {
		return time.Duration(t)
	}
	return r.Timeout
}

type cached struct {
	ans     Answer
	expires time.Time
}

// Cache limits. cacheEntries is one integration's share.
const (
	MaxTTL       = 300 * time.Second
	cacheEntries = 1024
	maxCNAMEs    = 8
	ednsSize     = 1232
	// maxAddrsPerFamily bounds what one answer costs: every address used is
	// checked on every CONNECT (a kernel route lookup each), and a hostile
	// zone can put thousands of records, TTL 0, in one answer over TCP.
	// Records past it are ignored: never checked, never dialled.
	maxAddrsPerFamily = 16
)

// NewResolver returns a Resolver with a bounded cache.
func NewResolver(servers []string, timeout time.Duration) *Resolver {
	return &Resolver{Servers: servers, Timeout: timeout, caches: map[string]*lru.Cache[string, cached]{}}
}

// share returns owner's cache, made on first use.
func (r *Resolver) share(owner string) *lru.Cache[string, cached] {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.caches[owner]
	if !ok {
		c, _ = lru.New[string, cached](cacheEntries)
		r.caches[owner] = c
	}
	return c
}

// Forget drops owner's share (an integration removed from the config).
func (r *Resolver) Forget(owner string) {
	r.mu.Lock()
	delete(r.caches, owner)
	r.mu.Unlock()
}

// ErrNoAddress means the name exists in no usable form: NXDOMAIN, or no A
// or AAAA records at the end of the chain.
var ErrNoAddress = errors.New("no A or AAAA records")

// Resolve returns name's addresses from the shared (owner "") cache.
func (r *Resolver) Resolve(ctx context.Context, name allowlist.Name) (Answer, error) {
	return r.ResolveFor(ctx, "", name)
}

// ResolveFor returns name's addresses, cached in owner's share.
// Concurrent calls for one name share one upstream query, whoever asks.
func (r *Resolver) ResolveFor(ctx context.Context, owner string, name allowlist.Name) (Answer, error) {
	cache := r.share(owner)
	if c, ok := cache.Get(name.String()); ok && r.now().Before(c.expires) {
		return c.ans, nil
	}
	v, err, _ := r.group.Do(name.String(), func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout())
		defer cancel()
		ans, ttl, err := r.lookup(ctx, name)
		return cached{ans: ans, expires: r.now().Add(ttl)}, err
	})
	if err != nil {
		return Answer{}, err
	}
	c := v.(cached)
	if c.expires.After(r.now()) {
		cache.Add(name.String(), c)
	}
	return c.ans, nil
}

func (r *Resolver) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// lookup asks for A then AAAA and joins them. The TTL is the smallest of
// every record used, clamped to [0, MaxTTL].
func (r *Resolver) lookup(ctx context.Context, name allowlist.Name) (Answer, time.Duration, error) {
	var ans Answer
	ttl := MaxTTL
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		addrs, chain, t, err := r.query(ctx, name, qtype)
		if err != nil {
			return Answer{}, 0, err
		}
		ans.Addrs = append(ans.Addrs, addrs...)
		if len(chain) > len(ans.CNAMEs) {
			ans.CNAMEs = chain
		}
		ttl = min(ttl, t)
	}
	if len(ans.Addrs) == 0 {
		return Answer{}, 0, fmt.Errorf("%s: %w", name, ErrNoAddress)
	}
	return ans, max(ttl, 0), nil
}

// query runs one question against the servers in turn, falling back to TCP
// when an answer is truncated, and extracts the chain's addresses.
func (r *Resolver) query(ctx context.Context, name allowlist.Name, qtype uint16) ([]netip.Addr, []string, time.Duration, error) {
	if len(r.Servers) == 0 {
		return nil, nil, 0, errors.New("no DNS servers configured")
	}
	var lastErr error
	for _, server := range r.Servers {
		msg, err := r.exchange(ctx, server, name, qtype)
		if err != nil {
			lastErr = err
			continue
		}
		return followChain(msg, name, qtype)
	}
	return nil, nil, 0, lastErr
}

func (r *Resolver) exchange(ctx context.Context, server string, name allowlist.Name, qtype uint16) (*dns.Msg, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name.String()), qtype)
	q.SetEdns0(ednsSize, false)
	q.RecursionDesired = true
	start := time.Now()
	defer func() {
		if r.Observe != nil {
			r.Observe(time.Since(start))
		}
	}()
	c := &dns.Client{Net: "udp", UDPSize: ednsSize}
	resp, _, err := c.ExchangeContext(ctx, q, server)
	if err == nil && resp.Truncated {
		c.Net = "tcp"
		resp, _, err = c.ExchangeContext(ctx, q, server)
	}
	if err != nil {
		return nil, err
	}
	if err := validate(q, resp); err != nil {
		return nil, fmt.Errorf("%s from %s: %w", name, server, err)
	}
	return resp, nil
}

// validate checks that resp answers q: the question is echoed, the answer is
// complete, and the rcode is one we can use.
func validate(q, resp *dns.Msg) error {
	if !resp.Response || resp.Id != q.Id {
		return errors.New("not a response to our query")
	}
	if len(resp.Question) != 1 || !strings.EqualFold(resp.Question[0].Name, q.Question[0].Name) ||
		resp.Question[0].Qtype != q.Question[0].Qtype || resp.Question[0].Qclass != q.Question[0].Qclass {
		return errors.New("answer does not echo the question")
	}
	if resp.Truncated {
		return errors.New("answer truncated even over TCP")
	}
	switch resp.Rcode {
	case dns.RcodeSuccess, dns.RcodeNameError:
		return nil
	}
	return fmt.Errorf("rcode %s", dns.RcodeToString[resp.Rcode])
}

// followChain walks the answer section from the question's name: A/AAAA
// records at the current owner end the walk, a CNAME moves the owner on.
// Records outside the chain are ignored. A CNAME target must be a usable
// public name: not single-label, not special-use, not ending in a number.
func followChain(resp *dns.Msg, name allowlist.Name, qtype uint16) ([]netip.Addr, []string, time.Duration, error) {
	owner := name.String()
	ttl := MaxTTL
	var chain []string
	for depth := 0; ; depth++ {
		var addrs []netip.Addr
		var next string
		for _, rr := range resp.Answer {
			h := rr.Header()
			if !strings.EqualFold(strings.TrimSuffix(h.Name, "."), owner) || h.Class != dns.ClassINET {
				continue
			}
			switch rec := rr.(type) {
			case *dns.A:
				if qtype == dns.TypeA {
					if a, ok := netip.AddrFromSlice(rec.A.To4()); ok {
						addrs = append(addrs, a)
						ttl = min(ttl, time.Duration(h.Ttl)*time.Second)
					}
				}
			case *dns.AAAA:
				if qtype == dns.TypeAAAA {
					if a, ok := netip.AddrFromSlice(rec.AAAA.To16()); ok {
						addrs = append(addrs, a)
						ttl = min(ttl, time.Duration(h.Ttl)*time.Second)
					}
				}
			case *dns.CNAME:
				next = rec.Target
				ttl = min(ttl, time.Duration(h.Ttl)*time.Second)
			}
		}
		if len(addrs) > 0 || next == "" {
			return addrs[:min(len(addrs), maxAddrsPerFamily)], chain, ttl, nil
		}
		if depth == maxCNAMEs {
			return nil, nil, 0, fmt.Errorf("%s: CNAME chain longer than %d", name, maxCNAMEs)
		}
		target, err := allowlist.ParseWireHost(next, allowlist.HostForm)
		if err != nil || target.IsSingleLabel() || target.IsSpecialUse() {
			return nil, nil, 0, fmt.Errorf("%s: CNAME to an unusable name %q", name, capStr(next, 253))
		}
		owner = target.String()
		chain = append(chain, owner)
	}
}

func capStr(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
