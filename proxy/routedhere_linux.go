package proxy

import (
	"errors"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// routedHere asks the kernel how it would route a, as "ip route get" does:
// true when the route is of type local, so a connection to a would reach
// this host. That covers the host's interface addresses and the local
// routes no interface lists (AnyIP's "ip route add local PREFIX dev lo",
// TPROXY setups), in every table and rule the kernel consults, as they are
// at this moment. No route at all is not here: the dial fails.
func routedHere(a netip.Addr) (bool, error) {
	routes, err := netlink.RouteGet(a.Unmap().AsSlice())
	if errors.Is(err, unix.ENETUNREACH) || errors.Is(err, unix.EHOSTUNREACH) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range routes {
		if r.Type == unix.RTN_LOCAL {
			return true, nil
		}
	}
	return false, nil
}
