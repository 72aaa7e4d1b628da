package selftest

import (
	"net/netip"

	"golang.org/x/sys/unix"
)

// sendBoundToLo sends one datagram to each target from an AF_INET6 socket
// that a failed connect to fe80::1%lo left bound to lo: no socket option
// names the interface, and the datagram leaves by lo, past the routing
// table. The sandbox steers what leaves lo to egress0, where it is
// audited like any other (judged by attempts-audited).
func sendBoundToLo(targets []string, payload []byte) (string, string, []string) {
	return sendEach(targets, "datagram sent by lo", func(t string) error {
		ap, err := netip.ParseAddrPort(t)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		unix.Connect(fd, &unix.SockaddrInet6{Port: 9, Addr: netip.MustParseAddr("fe80::1").As16(), ZoneId: 1}) // fails, and binds the socket to lo
		return unix.Sendto(fd, payload, 0, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: netip.AddrFrom16(ap.Addr().As16()).As16()})
	})
}
