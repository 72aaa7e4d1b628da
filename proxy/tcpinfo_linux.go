package proxy

import (
	"net"

	"golang.org/x/sys/unix"
)

// trafficCounters reads the kernel's byte counters for c from TCP_INFO:
// bytes acknowledged by the peer and bytes received from it. Reading them
// needs no wrapper around the connection, so splice stays in use.
func trafficCounters(c *net.TCPConn) (sent, received uint64, ok bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return 0, 0, false
	}
	return info.Bytes_acked, info.Bytes_received, true
}
