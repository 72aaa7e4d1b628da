package proxy

import (
	"net/netip"
	"sync"
	"time"

	"github.com/egressd/egressd/allowlist"
)

// SyntheticPrefix is where sandboxed names get their addresses: inside
// loopback, so a connection to one lands on the sandbox's own capture
// listener, and nothing outside the sandbox is ever named.
var SyntheticPrefix = netip.MustParsePrefix("127.1.0.0/16")

// Synthetic maps allowed names to stable addresses in SyntheticPrefix and
// back. It is bounded: when every address is taken, it evicts the entry
// idle longest, if that one has been idle past its TTL; otherwise it is
// exhausted and says so.
type Synthetic struct {
	mu     sync.Mutex
	ttl    time.Duration
	now    func() time.Time
	byName map[allowlist.Name]*synthEntry
	byAddr map[netip.Addr]*synthEntry
	next   netip.Addr
	size   int
}

type synthEntry struct {
	name     allowlist.Name
	addr     netip.Addr
	lastUsed time.Time
}

// NewSynthetic holds at most size names (at most 65,534), each kept at
// least ttl after its last use.
func NewSynthetic(size int, ttl time.Duration) *Synthetic {
	size = min(size, 1<<16-2)
	return &Synthetic{ttl: ttl, now: time.Now, size: size, byName: map[allowlist.Name]*synthEntry{},
		byAddr: map[netip.Addr]*synthEntry{}, next: SyntheticPrefix.Addr().Next()}
}

// Assign returns name's address, giving it one if it has none. ok is false
// when the table is exhausted.
func (s *Synthetic) Assign(name allowlist.Name) (netip.Addr, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if e, ok := s.byName[name]; ok {
		e.lastUsed = now
		return e.addr, true
	}
	addr, ok := s.freeAddr(now)
	if !ok {
		return netip.Addr{}, false
	}
	e := &synthEntry{name: name, addr: addr, lastUsed: now}
	s.byName[name], s.byAddr[addr] = e, e
	return addr, true
}

// Lookup maps an address back to its name, marking it used.
func (s *Synthetic) Lookup(a netip.Addr) (allowlist.Name, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byAddr[a.Unmap()]
	if !ok {
		return allowlist.Name{}, false
	}
	e.lastUsed = s.now()
	return e.name, true
}

func (s *Synthetic) freeAddr(now time.Time) (netip.Addr, bool) {
	if len(s.byAddr) < s.size {
		for {
			a := s.next
			s.next = s.next.Next()
			if !SyntheticPrefix.Contains(s.next) || s.next == lastUsable {
				s.next = SyntheticPrefix.Addr().Next()
			}
			if _, taken := s.byAddr[a]; !taken {
				return a, true
			}
		}
	}
	var oldest *synthEntry
	for _, e := range s.byAddr {
		if oldest == nil || e.lastUsed.Before(oldest.lastUsed) {
			oldest = e
		}
	}
	if oldest == nil || now.Sub(oldest.lastUsed) < s.ttl {
		return netip.Addr{}, false
	}
	delete(s.byName, oldest.name)
	delete(s.byAddr, oldest.addr)
	return oldest.addr, true
}

var lastUsable = netip.MustParseAddr("127.1.255.255")
