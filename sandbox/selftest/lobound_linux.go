package selftest

import (
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"
)

// sendBoundToLo sends one datagram to each target from an AF_INET6 socket
// that a failed connect to fe80::1%lo left bound to lo: no socket option
// names the interface, and the datagram leaves by lo, past the routing
// table. The sandbox steers what leaves lo to egress0, where it is
// audited like any other (judged by attempts-audited).
func sendBoundToLo(targets []string, payload []byte) (string, string, []string) {
	if len(targets) == 0 {
		v, d := skipped("no targets")
		return v, d, nil
	}
	var notes, reached []string
	verdict := Closed
	for _, t := range targets {
		ap, err := netip.ParseAddrPort(t)
		fd := -1
		if err == nil {
			fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		}
		if err == nil {
			unix.Connect(fd, &unix.SockaddrInet6{Port: 9, Addr: netip.MustParseAddr("fe80::1").As16(), ZoneId: 1}) // fails, and binds the socket to lo
			err = unix.Sendto(fd, payload, 0, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: netip.AddrFrom16(ap.Addr().As16()).As16()})
			unix.Close(fd)
		}
		if err == nil {
			verdict = Open
			reached = append(reached, t)
			notes = append(notes, t+": datagram sent by lo")
		} else {
			notes = append(notes, t+": "+short(err))
		}
	}
	return verdict, strings.Join(notes, "; "), reached
}
