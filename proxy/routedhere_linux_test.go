package proxy

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestRoutedHereKnowsLoopbackIsThisHost: the kernel's answer for the
// loopback addresses is a local route.
func TestRoutedHereKnowsLoopbackIsThisHost(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "127.0.0.2", "::ffff:127.0.0.1"} {
		here, err := routedHere(netip.MustParseAddr(a))
		if err != nil || !here {
			t.Fatalf("routedHere(%s) = %v, %v", a, here, err)
		}
	}
}

// BenchmarkRoutedHere is what the pre-dial route check costs a CONNECT,
// per address.
func BenchmarkRoutedHere(b *testing.B) {
	a := netip.MustParseAddr("192.0.2.1")
	for b.Loop() {
		routedHere(a)
	}
}

// inFreshNetns runs f on a thread of its own in a network namespace made
// for the test, with only lo, up. The thread is never unlocked, so it
// exits with the goroutine and the namespace goes with it.
func inFreshNetns(t *testing.T, f func()) {
	t.Helper()
	failed := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			failed <- err
			return
		}
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			failed <- err
			return
		}
		defer close(failed)
		f()
	}()
	if err, ok := <-failed; ok {
		if os.Getenv("CI") == "true" {
			t.Fatalf("a network namespace for the test: %v", err)
		}
		t.Skipf("no network namespace for the test (%v): run as root", err)
	}
}

// TestALocalRouteAddedAfterAnAnswerWasCachedCountsAtOnce: the route cache
// must never answer from before a change. In the test's namespace an
// address is asked about (not here, and now cached), then made this host's
// by a local route (IPv4, IPv6), an address on lo, and a rule to a table
// with a local route: the very next question, with no wait, must say here
// each time.
func TestALocalRouteAddedAfterAnAnswerWasCachedCountsAtOnce(t *testing.T) {
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	inFreshNetns(t, func() {
		c := newRouteCache()
		defer c.Close()
		if c.events < 0 {
			fail("no route subscription in the namespace")
			return
		}
		ask := func(addr string, want bool, after string) {
			a := netip.MustParseAddr(addr)
			for range 3 { // the second and third answers come from the cache
				if here, err := c.routedHere(a); here != want || err != nil {
					fail("%s, after %s: routedHere = %v, %v; want %v", addr, after, here, err, want)
					return
				}
			}
		}
		lo, _ := netlink.LinkByName("lo")
		local := func(prefix string, table int) *netlink.Route {
			return &netlink.Route{LinkIndex: lo.Attrs().Index, Dst: netlink.NewIPNet(net.ParseIP(prefix)), Type: unix.RTN_LOCAL, Table: table, Scope: netlink.SCOPE_HOST}
		}
		must := func(what string, err error) {
			if err != nil {
				fail("%s: %v", what, err)
			}
		}

		ask("198.51.100.7", false, "nothing")
		r := local("198.51.100.7", unix.RT_TABLE_LOCAL)
		must("ip route add local 198.51.100.7", netlink.RouteAdd(r))
		ask("198.51.100.7", true, "ip route add local")
		must("ip route del local 198.51.100.7", netlink.RouteDel(r))
		ask("198.51.100.7", false, "ip route del local")

		ask("203.0.113.5", false, "nothing")
		must("ip addr add 203.0.113.5/32 dev lo", netlink.AddrAdd(lo, &netlink.Addr{IPNet: netlink.NewIPNet(net.ParseIP("203.0.113.5"))}))
		ask("203.0.113.5", true, "ip addr add")

		// An IPv6 address gets its local route later, from the kernel's
		// address worker (a fresh query says "not here" too until then),
		// so the IPv6 case is a local route, added synchronously.
		ask("2001:db8::9", false, "nothing")
		must("ip -6 route add local 2001:db8::9", netlink.RouteAdd(local("2001:db8::9", unix.RT_TABLE_LOCAL)))
		ask("2001:db8::9", true, "ip -6 route add local")

		ask("192.0.2.44", false, "nothing")
		must("ip route add local 192.0.2.44 table 100", netlink.RouteAdd(local("192.0.2.44", 100)))
		ask("192.0.2.44", false, "a local route in a table no rule reads")
		rule := netlink.NewRule()
		rule.Table, rule.Priority, rule.Family = 100, 100, unix.AF_INET
		must("ip rule add lookup 100", netlink.RuleAdd(rule))
		ask("192.0.2.44", true, "ip rule add lookup 100")
	})
	for _, e := range errs {
		t.Error(e)
	}
}

// BenchmarkRoutedHereCached is the same question answered by the cache:
// one poll(2) and no allocation while the routes stand still.
func BenchmarkRoutedHereCached(b *testing.B) {
	c := newRouteCache()
	defer c.Close()
	a := netip.MustParseAddr("192.0.2.1")
	for b.Loop() {
		c.routedHere(a)
	}
}
