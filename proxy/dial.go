package proxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// AddrChecker judges one address; it is policy.Policy.CheckAddr's shape
// reduced to a yes or no.
type AddrChecker func(netip.Addr) bool

// dialPinned connects to exactly addr. The address is checked again in
// net.Dialer.Control, just before connect(2), so nothing between the check
// and the dial (a cache, a retry, a resolver in the dialer) can swap it.
func dialPinned(ctx context.Context, addr netip.AddrPort, timeout time.Duration, allowed AddrChecker) (*net.TCPConn, error) {
	d := net.Dialer{
		Timeout: timeout,
		Control: func(network, address string, _ syscall.RawConn) error {
			got, err := netip.ParseAddrPort(address)
			if err != nil || got.Addr().Unmap() != addr.Addr().Unmap() || got.Port() != addr.Port() {
				return fmt.Errorf("dial to %s, not the checked %s", address, addr)
			}
			if !allowed(got.Addr()) {
				return fmt.Errorf("address %s refused at connect time", got.Addr())
			}
			return nil
		},
	}
	c, err := d.DialContext(ctx, "tcp", addr.String())
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// dialFirst tries the vetted addresses in order (A before AAAA) and returns
// the first connection made.
func dialFirst(ctx context.Context, addrs []netip.Addr, port uint16, timeout time.Duration, allowed AddrChecker) (*net.TCPConn, netip.AddrPort, error) {
	var lastErr error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, port)
		c, err := dialPinned(ctx, ap, timeout, allowed)
		if err == nil {
			return c, ap, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, netip.AddrPort{}, lastErr
}
