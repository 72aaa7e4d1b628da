package proxy

import (
	"errors"
	"net/netip"
	"sync"

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

// routeCache answers routedHere from what the kernel said before, for as
// long as nothing that could change the answer has happened since.
//
// Asking the kernel is a netlink socket opened, bound, asked, read and
// closed: eleven system calls and two dozen allocations per connection
// (after the resolve; a brokered tunnel's redial asks again at connect(2)).
// The cache asks once per address instead, and before trusting an answer
// makes one poll(2) of a netlink socket subscribed to every change of
// links, addresses, routes and rules in both families. The kernel queues
// that notification as it makes the change, before the change's own
// system call returns, so an empty queue at the poll means the table is as
// it was when the answer was read: the answer is as current as a fresh
// query would have been, with no window for a goroutine to wake. (An IPv6
// address's local route comes a moment after "ip addr add" returns, from
// the kernel's address worker, with its notification: a fresh query says
// "not here" until then too.) A queued notification, or an overflowed
// queue (ENOBUFS, POLLERR), drops every answer.
type routeCache struct {
	events int // the subscribed netlink socket; -1 when it could not be opened

	mu   sync.Mutex
	gen  uint64 // bumped each time the answers are dropped
	here map[netip.Addr]bool
}

// maxCachedRoutes bounds the answers kept: an integration controls its DNS
// and can name as many addresses as it likes. Past it the cache starts
// over.
const maxCachedRoutes = 4096

// routeEventGroups are the netlink multicast groups whose changes can make
// an address local: a link coming up, an address added, a local route
// added, a rule sending lookups to another table.
const routeEventGroups = unix.RTMGRP_LINK |
	unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR |
	unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE |
	unix.RTMGRP_IPV4_RULE | 1<<(unix.RTNLGRP_IPV6_RULE-1)

// newRouteCache subscribes to route changes in the calling thread's
// network namespace, the one the proxy dials from. If the subscription
// cannot be made, every question goes to the kernel, as without a cache.
func newRouteCache() *routeCache {
	c := &routeCache{events: -1, here: make(map[netip.Addr]bool)}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return c
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: routeEventGroups}); err != nil {
		unix.Close(fd)
		return c
	}
	c.events = fd
	return c
}

// routedHere is the package's routedHere, answered from the cache when no
// change has been announced since the answer was read.
func (c *routeCache) routedHere(a netip.Addr) (bool, error) {
	a = a.Unmap().WithZone("")
	c.mu.Lock()
	if c.events < 0 {
		c.mu.Unlock()
		return routedHere(a)
	}
	// The poll, the drop and the read are one step: an answer read after
	// someone else emptied the queue but before they dropped the answers
	// would be stale.
	changed, err := c.changed()
	if err != nil {
		c.mu.Unlock()
		return routedHere(a) // the subscription is broken: ask every time
	}
	if changed {
		clear(c.here)
		c.gen++
	}
	here, known := c.here[a]
	gen := c.gen
	c.mu.Unlock()
	if known {
		return here, nil
	}
	here, err = routedHere(a)
	if err != nil {
		return here, err // an unreadable route is asked again next time
	}
	c.mu.Lock()
	// A change announced while the kernel was being asked dropped the
	// answers (gen moved): this one may predate it, so it is not kept.
	if c.gen == gen {
		if len(c.here) >= maxCachedRoutes {
			clear(c.here)
		}
		c.here[a] = here
	}
	c.mu.Unlock()
	return here, nil
}

// changed reports whether the subscription holds a notification (or has
// lost some), and if so empties it. One poll(2) when nothing changed; c.mu
// is held.
func (c *routeCache) changed() (bool, error) {
	fds := [1]unix.PollFd{{Fd: int32(c.events), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds[:], 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, err
		}
		if n == 0 {
			return false, nil
		}
		break
	}
	if err := c.drain(); err != nil {
		return false, err
	}
	return true, nil
}

// drain empties the subscription. Its 8 KiB buffer is in a frame of its
// own, apart from changed's, so the poll every connection makes keeps a
// small frame: in changed's frame it made each handler's goroutine grow
// its stack (a copy of the whole stack) just to ask.
func (c *routeCache) drain() error {
	buf := make([]byte, 8<<10)
	for {
		_, err := unix.Read(c.events, buf)
		switch {
		case err == nil, errors.Is(err, unix.ENOBUFS), errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return nil
		default:
			return err
		}
	}
}

// Close ends the subscription; the cache then asks the kernel every time.
func (c *routeCache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.events < 0 {
		return nil
	}
	fd := c.events
	c.events = -1
	return unix.Close(fd)
}
