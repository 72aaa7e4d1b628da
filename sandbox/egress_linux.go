package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Every connection the program makes around the proxy must end in an
// audited refusal, and nothing may leave. The sandbox's network namespace
// therefore has one interface besides lo: egress0, a TUN device whose
// other end is a file the supervisor reads. The default routes, IPv4 and
// IPv6, point at it, so a connect to any address that is not the
// sandbox's own loopback becomes a packet in the supervisor's hands rather
// than an ENETUNREACH no one sees. The supervisor reports each TCP SYN and
// each UDP datagram and answers a SYN with a reset, so the program's
// connect fails at once (ECONNREFUSED). There is no forwarding code at
// all: a packet read from the TUN goes nowhere.
//
// This needs no netfilter, no TPROXY and no capability outside the
// sandbox's own user namespace, only /dev/net/tun.

const egressLink = "egress0"

// The sandbox's own addresses on egress0, so the kernel has a source
// address to route from: the IPv4 dummy address (RFC 7600) and an address
// in the IPv6 discard-only prefix (RFC 6666). Both are in egressd's denied
// ranges.
var (
	egressAddr4 = netip.MustParseAddr("192.0.0.8")
	egressAddr6 = netip.MustParseAddr("100::8")
)

// openEgress creates egress0 inside the sandbox's network namespace, with
// the default routes through it, and returns the TUN file the supervisor
// will read. IPv6 is turned on for egress0 alone (lo keeps it off), so an
// IPv6 attempt is seen too. fd is /dev/net/tun as a root supervisor opened
// it in this namespace (openTunIn), or -1: the init opens it itself.
func openEgress(fd int) (*os.File, error) {
	if fd < 0 {
		var err error
		if fd, err = unix.Open(tunPath, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0); err != nil {
			return nil, step("open "+tunPath+" (the sandbox needs TUN to audit direct connections; the sandbox's own user opens it, so it must be mode 0666, the distributions' default)", err)
		}
	}
	f := os.NewFile(uintptr(fd), egressLink)
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	ifr, err := unix.NewIfreq(egressLink)
	if err != nil {
		return nil, step("create "+egressLink, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return nil, step("create "+egressLink, err)
	}
	// Persistent: closing the last fd then leaves the device to the
	// namespace's own teardown, which the kernel does in the background,
	// rather than unregistering it in close (about 15 ms on each exit).
	// The device cannot outlive the namespace, which dies with the sandbox.
	if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1); err != nil {
		return nil, step("create "+egressLink, err)
	}
	ipv6 := true
	for _, s := range []struct{ key, value string }{{"addr_gen_mode", "1"}, {"accept_ra", "0"}, {"disable_ipv6", "0"}} {
		if err := writeFile("/proc/sys/net/ipv6/conf/"+egressLink+"/"+s.key, s.value); errors.Is(err, os.ErrNotExist) {
			ipv6 = false // a kernel without IPv6: nothing to route
			break
		} else if err != nil {
			return nil, step("IPv6 on "+egressLink, err)
		}
	}
	if err := routeEverything(ipv6); err != nil {
		return nil, step("route through "+egressLink, err)
	}
	if err := steerLoopback(); err != nil {
		return nil, step("steer lo's outgoing packets to "+egressLink+" (tc clsact, u32, mirred)", err)
	}
	ok = true
	return f, nil
}

// steerLoopback sends every packet that leaves by lo for an address that
// is not the sandbox's own (127.0.0.0/8, and egress0's addresses, whose
// traffic the kernel loops through lo) to egress0, where egressd audits
// it. The routing table is not enough: a socket can leave by lo past it
// (round 52: SO_BINDTODEVICE, IP_UNICAST_IF, IP_PKTINFO; round 53: a
// failed connect to fe80::1%lo binds the socket to lo and keeps the
// binding, a socket bound to 127.0.0.1 sends multicast and broadcast by
// lo, and a routing header whose first hop is 100::8 leaves by lo).
// Such a packet went nowhere, but no audit line named it, and a connect
// hung instead of being refused. IPv6 is off on lo: the only IPv6 that
// stays is the kernel's own answer to egress0's IPv6 address.
func steerLoopback() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	egress, err := netlink.LinkByName(egressLink)
	if err != nil {
		return err
	}
	at := lo.Attrs().Index
	if err := netlink.QdiscAdd(&netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: at, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}); err != nil {
		return fmt.Errorf("clsact on lo: %w", err)
	}
	ownIPv4 := egressAddr4.As4()
	ipv4Dst := func(val, mask uint32) *netlink.TcU32Sel { // the IPv4 header's destination, 16 bytes in
		return &netlink.TcU32Sel{Flags: netlink.TC_U32_TERMINAL, Keys: []netlink.TcU32Key{{Val: val, Mask: mask, Off: 16}}}
	}
	// egress0's IPv6 address, with TCP, UDP or ICMPv6 right after the
	// fixed header: the kernel's own answers to the sandbox's address (a
	// reset, an unreachable) stay; a routing header in front, whose first
	// hop is that address and whose real destination is further in, does
	// not (round 53).
	ownIPv6 := egressAddr6.As16()
	ipv6To := func(next uint32) *netlink.TcU32Sel {
		keys := []netlink.TcU32Key{{Val: next << 8, Mask: 0xff00, Off: 4}} // next header, byte 6
		for i := 0; i < 16; i += 4 {
			keys = append(keys, netlink.TcU32Key{Val: binary.BigEndian.Uint32(ownIPv6[i : i+4]), Mask: 0xffffffff, Off: int32(24 + i)})
		}
		return &netlink.TcU32Sel{Flags: netlink.TC_U32_TERMINAL, Keys: keys}
	}
	filters := []*netlink.U32{
		// Matched with no action: the packet goes on by lo.
		{FilterAttrs: netlink.FilterAttrs{Priority: 1, Protocol: unix.ETH_P_IP}, Sel: ipv4Dst(0x7f000000, 0xff000000)},
		{FilterAttrs: netlink.FilterAttrs{Priority: 2, Protocol: unix.ETH_P_IP}, Sel: ipv4Dst(binary.BigEndian.Uint32(ownIPv4[:]), 0xffffffff)},
		{FilterAttrs: netlink.FilterAttrs{Priority: 3, Protocol: unix.ETH_P_IPV6}, Sel: ipv6To(unix.IPPROTO_TCP)},
		{FilterAttrs: netlink.FilterAttrs{Priority: 4, Protocol: unix.ETH_P_IPV6}, Sel: ipv6To(unix.IPPROTO_UDP)},
		{FilterAttrs: netlink.FilterAttrs{Priority: 5, Protocol: unix.ETH_P_IPV6}, Sel: ipv6To(unix.IPPROTO_ICMPV6)},
		// Everything else, IPv4 and IPv6: to egress0.
		{FilterAttrs: netlink.FilterAttrs{Priority: 6, Protocol: unix.ETH_P_IP}, Actions: []netlink.Action{netlink.NewMirredAction(egress.Attrs().Index)}},
		{FilterAttrs: netlink.FilterAttrs{Priority: 7, Protocol: unix.ETH_P_IPV6}, Actions: []netlink.Action{netlink.NewMirredAction(egress.Attrs().Index)}},
	}
	for _, f := range filters {
		f.LinkIndex, f.Parent = at, netlink.HANDLE_MIN_EGRESS
		if err := netlink.FilterAdd(f); err != nil {
			return fmt.Errorf("filter %d on lo: %w", f.Priority, err)
		}
	}
	return nil
}

// routeEverything brings egress0 up with the sandbox's addresses and makes
// it the default route.
func routeEverything(ipv6 bool) error {
	link, err := netlink.LinkByName(egressLink)
	if err != nil {
		return err
	}
	// No qdisc in front of the TUN's own queue: a pfifo_fast there drops
	// a burst's overflow where egress0's drop counter does not see it (and
	// sendto still reports success), so those attempts would leave no
	// trace. With noqueue, every packet egressd does not read is one the
	// TUN dropped and counted.
	noqueue := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_ROOT}, QdiscType: "noqueue"}
	if err := netlink.QdiscReplace(noqueue); err != nil {
		return fmt.Errorf("noqueue on %s: %w", egressLink, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return err
	}
	addrs := []netip.Addr{egressAddr4}
	if ipv6 {
		addrs = append(addrs, egressAddr6)
	}
	for _, a := range addrs {
		bits := a.BitLen()
		ipn := &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, bits)}
		if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipn, Flags: unix.IFA_F_NODAD}); err != nil {
			return fmt.Errorf("address %s: %w", a, err)
		}
		any := &net.IPNet{IP: make(net.IP, bits/8), Mask: net.CIDRMask(0, bits)}
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: any, Src: a.AsSlice(), Scope: netlink.SCOPE_LINK}
		if a.Is6() {
			// Through one next hop: a link route gave every IPv6
			// destination a neighbour entry of its own, in the one table
			// every namespace shares, and a sandbox sending to 20,000
			// addresses evicted the host's (round 57). egress0 has no link
			// layer: the next hop only names the one entry.
			route.Gw, route.Scope, route.Flags = net.ParseIP("fe80::1"), netlink.SCOPE_UNIVERSE, int(netlink.FLAG_ONLINK)
		}
		if err := netlink.RouteAdd(route); err != nil {
			return fmt.Errorf("default route for %s: %w", a, err)
		}
	}
	if ipv6 {
		// The kernel's own multicast route on egress0 (ff00::/8, local
		// table) has no next hop: each group a program sends to took a
		// neighbour entry of its own in the table every namespace shares,
		// and 3,000 groups evicted another namespace's entries (round
		// 58). Without it, multicast takes the default route's one next
		// hop too. The program cannot bring egress0 down and up, which
		// would add it again.
		mcast := &net.IPNet{IP: net.ParseIP("ff00::"), Mask: net.CIDRMask(8, 128)}
		if err := netlink.RouteDel(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: mcast, Table: unix.RT_TABLE_LOCAL, Type: unix.RTN_MULTICAST}); err != nil {
			return fmt.Errorf("multicast route on %s: %w", egressLink, err)
		}
		// IPv6 is off on lo, so ::1 would take the default route, and a
		// reset from ::1 arriving on egress0 is a martian the kernel drops:
		// make it fail at once instead, as a loopback port with nothing
		// behind it does.
		loop := &net.IPNet{IP: net.IPv6loopback, Mask: net.CIDRMask(128, 128)}
		if err := netlink.RouteAdd(&netlink.Route{Dst: loop, Type: unix.RTN_UNREACHABLE}); err != nil {
			return fmt.Errorf("unreachable ::1: %w", err)
		}
	}
	return nil
}

// egress0 holds at most its queue length (500 packets) that the supervisor
// has not read yet; the kernel drops what a burst sends past that, and
// counts it (in the TUN itself: routeEverything leaves no qdisc in front). Those are attempts too, whose destinations no one saw, so the
// supervisor keeps the sandbox's /proc/net/dev open (the open file keeps
// the namespace, and so egress0's counters, alive after the program exits)
// and audits the count.

const tunPath = "/dev/net/tun"

// openTunIn opens /dev/net/tun in the network namespace of process pid,
// the sandbox's init, from a thread that enters that namespace for the
// open alone: a TUN device is created in the namespace its file was
// opened in, and the init, whose user is unprivileged on the host, cannot
// open a /dev/net/tun that is not mode 0666 (seen: 0600 on our own CI
// machine).
// Only root may enter the namespace. The thread goes back to this
// process's namespace; if it cannot, it stays locked and dies with its
// goroutine, so no other goroutine ever runs in the sandbox's network.
func openTunIn(pid int) (int, error) {
	target, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("sandbox: the sandbox's network namespace: %w", err)
	}
	defer unix.Close(target)
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{-1, fmt.Errorf("sandbox: this process's network namespace: %w", err)}
			return
		}
		defer unix.Close(self)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{-1, fmt.Errorf("sandbox: enter the sandbox's network namespace: %w", err)}
			return
		}
		fd, err := unix.Open(tunPath, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			err = fmt.Errorf("sandbox: open %s (the sandbox needs TUN to audit direct connections): %w", tunPath, err)
		}
		if unix.Setns(self, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- result{fd, err}
	}()
	r := <-done
	return r.fd, r.err
}

// openEgressStats opens /proc/net/dev as the init's network namespace
// shows it.
func openEgressStats(initPID int) (*os.File, error) {
	return os.Open(fmt.Sprintf("/proc/%d/net/dev", initPID))
}

// EgressDropped is how many packets the program sent to egress0 that the
// kernel dropped, its queue being full, before the supervisor read them.
func (sb *Sandbox) EgressDropped() (uint64, error) {
	if sb.egressStats == nil {
		return 0, errors.New("sandbox: egress0's counters are not open")
	}
	buf := make([]byte, 64<<10)
	n, err := sb.egressStats.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, fmt.Errorf("sandbox: egress0's counters: %w", err)
	}
	return txDropped(string(buf[:n]), egressLink)
}

// txDropped reads a device's transmit drops out of /proc/net/dev's text:
// after "name:", eight receive counters, then bytes, packets, errs, drop.
func txDropped(dev, name string) (uint64, error) {
	for _, line := range strings.Split(dev, "\n") {
		ifname, counters, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(ifname) != name {
			continue
		}
		f := strings.Fields(counters)
		if len(f) < 12 {
			break
		}
		return strconv.ParseUint(f[11], 10, 64)
	}
	return 0, fmt.Errorf("sandbox: no %s in /proc/net/dev", name)
}
