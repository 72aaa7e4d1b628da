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

// CheckDialled judges a connection once made. It reached this host when
// its local and remote addresses are the same (Linux picks the destination
// itself as the source for an IPv4 address of its own), or when it left
// from a loopback address for one that is not loopback (IPv6 to an address
// of a local route, such as AnyIP's "ip route add local PREFIX dev lo",
// leaves from ::1). This holds whatever the address list and the routing
// table said, so it closes the moment between a change and its event being
// read. An allow_private exemption covering the address still allows it.
func (p *Policy) CheckDialled(local, remote netip.Addr) Decision {
	local, remote = local.Unmap().WithZone(""), remote.Unmap().WithZone("")
	var rule string
	switch {
	case local == remote:
		rule = "the connection reached this host's own address " + remote.String()
	case local.IsLoopback() && !remote.IsLoopback():
		rule = "the connection to " + remote.String() + " left from loopback " + local.String() + ": the kernel delivered it to this host"
	default:
		return Decision{Verdict: Allow, Reason: Allowed}
	}
	return p.hostItself(remote, rule)
}

// CheckRoutedHere judges an address the kernel would deliver to this host
// (a route of type local: an interface address, or a local route such as
// AnyIP's), or whose route could not be read (err): it is denied like the
// host's own addresses, since a route table that cannot be read cannot
// say the address is elsewhere. An allow_private exemption still allows it.
func (p *Policy) CheckRoutedHere(a netip.Addr, err error) Decision {
	a = a.Unmap().WithZone("")
	rule := "the kernel routes " + a.String() + " to this host (a local route)"
	if err != nil {
		rule = "the kernel's route to " + a.String() + " could not be read (" + err.Error() + "): an address that may be this host's own is not connected to"
	}
	return p.hostItself(a, rule)
}

// hostItself denies an address found to be this host, unless an
// allow_private exemption covers it.
func (p *Policy) hostItself(a netip.Addr, rule string) Decision {
	for _, c := range p.Exemptions.AllowPrivate {
		if c.Contains(a) {
			return Decision{Verdict: Allow, Reason: Allowed, Exemption: "allow_private:" + c.String()}
		}
	}
	return Decision{Reason: PrivateAddress, Rule: rule}
}
