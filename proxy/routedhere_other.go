//go:build !linux

package proxy

import "net/netip"

// routedHere knows no routing table outside Linux: the host's interface
// addresses and the check after the dial are what judge the host there.
func routedHere(a netip.Addr) (bool, error) { return false, nil }

// routeCache has nothing to cache where routedHere asks nothing.
type routeCache struct{}

func newRouteCache() *routeCache                            { return &routeCache{} }
func (c *routeCache) routedHere(a netip.Addr) (bool, error) { return routedHere(a) }
func (c *routeCache) Close() error                          { return nil }
