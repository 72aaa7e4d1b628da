package policy

import (
	"net/netip"
	"sync/atomic"
)

// HostAddrs is the proxy host's own interface addresses, denied like
// loopback: a service bound to a LAN address is still this host. The
// addresses change while egressd runs (DHCP, temporary IPv6 addresses,
// an interface coming up), so the set is shared by every policy and
// replaced in place by whoever follows the host (proxy.FollowHostAddrs).
//
// When the addresses cannot be read, the set holds the error instead, and
// CheckAddr denies every address it would otherwise allow: an address
// that cannot be judged is not connected to.
type HostAddrs struct {
	cur atomic.Pointer[hostAddrSet]
}

type hostAddrSet struct {
	addrs []netip.Addr
	err   error
}

// NewHostAddrs returns a set holding addrs.
func NewHostAddrs(addrs []netip.Addr) *HostAddrs {
	h := &HostAddrs{}
	h.Set(addrs, nil)
	return h
}

// Set replaces the addresses; a non-nil err says they could not be read.
func (h *HostAddrs) Set(addrs []netip.Addr, err error) {
	norm := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		norm = append(norm, a.Unmap().WithZone(""))
	}
	h.cur.Store(&hostAddrSet{addrs: norm, err: err})
}

// Addrs returns the addresses now held, and the error if they are unknown.
func (h *HostAddrs) Addrs() ([]netip.Addr, error) {
	s := h.cur.Load()
	return s.addrs, s.err
}

// holds reports whether a or judged is one of the host's addresses, or
// the error that keeps it from knowing.
func (h *HostAddrs) holds(a, judged netip.Addr) (bool, error) {
	if h == nil {
		return false, nil
	}
	s := h.cur.Load()
	if s.err != nil {
		return false, s.err
	}
	for _, l := range s.addrs {
		if l == a || l == judged {
			return true, nil
		}
	}
	return false, nil
}

// CheckDialled judges a connection once made. When its local and remote
// addresses are the same, it reached this host: Linux picks the
// destination itself as the source for an address of its own. This holds
// whatever the address list says, so it closes the moment between an
// address being added and its event being read. An allow_private
// exemption covering the address still allows it.
func (p *Policy) CheckDialled(local, remote netip.Addr) Decision {
	local, remote = local.Unmap().WithZone(""), remote.Unmap().WithZone("")
	if local != remote {
		return Decision{Verdict: Allow, Reason: Allowed}
	}
	for _, c := range p.Exemptions.AllowPrivate {
		if c.Contains(remote) {
			return Decision{Verdict: Allow, Reason: Allowed, Exemption: "allow_private:" + c.String()}
		}
	}
	return Decision{Reason: PrivateAddress, Rule: "the connection reached this host's own address " + remote.String()}
}
