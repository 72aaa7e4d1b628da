package proxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/egressd/egressd/policy"
)

// ReadHostAddrs returns this host's interface addresses. The error is
// never dropped: without the list, a name resolving to the host's own
// address could not be told from a public one.
func ReadHostAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("reading the host's own addresses: %w (under systemd, RestrictAddressFamilies= must include AF_NETLINK)", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap().WithZone(""))
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out), nil
}

// FollowHostAddrs fills h with the host's addresses and keeps it current
// until ctx is done: it subscribes to the kernel's address events first,
// then reads, and reads again after every event, so no change between
// the two is lost. It returns an error, and egressd must not start, if
// the addresses cannot be read or followed. A later failure puts the error
// in h, which then denies what it cannot judge; changed (which may be nil)
// hears of every new list and every failure.
func FollowHostAddrs(ctx context.Context, h *policy.HostAddrs, changed func([]netip.Addr, error)) error {
	events, err := subscribeAddrEvents(ctx)
	if err != nil {
		return fmt.Errorf("following the host's own addresses: %w (under systemd, RestrictAddressFamilies= must include AF_NETLINK)", err)
	}
	addrs, err := ReadHostAddrs()
	if err != nil {
		events.Close()
		return err
	}
	h.Set(addrs, nil)
	go func() {
		defer events.Close()
		last := addrs
		for {
			err := events.Wait()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				h.Set(nil, fmt.Errorf("following the host's own addresses: %w", err))
				if changed != nil {
					changed(nil, err)
				}
				return
			}
			now, err := ReadHostAddrs()
			h.Set(now, err)
			if err != nil || !slices.Equal(now, last) {
				if changed != nil {
					changed(now, err)
				}
			}
			if err == nil {
				last = now
			}
		}
	}()
	return nil
}
