package proxy

import (
	"net"
	"syscall"

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

// bytesQueued reports whether c's receive queue holds bytes not yet read:
// a client whose request is in the kernel has sent it, whether or not
// net/http has read it yet.
func bytesQueued(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n > 0
}
