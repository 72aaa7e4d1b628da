package proxy

import (
	"io"
	"net"

	"golang.org/x/sys/unix"
)

// pump copies src to dst with splice(2), taking a pipe only while bytes
// are waiting. Go's splice holds a pipe pair (two fds and its buffer) for
// as long as a copy runs, idle or not: 10,000 idle tunnels would pin 40,000
// pipe fds. pump instead waits for src to be readable without reading,
// asks the kernel how many bytes are queued (SIOCINQ), and splices exactly
// those, so an idle tunnel holds its two sockets and nothing else.
//
// Both connections stay raw: the io.LimitedReader around src is the form
// Go's splice path takes a byte budget in.
func pump(dst *net.TCPConn, src net.Conn) (int64, error) {
	raw, err := rawConn(src)
	if err != nil || raw == nil {
		return io.Copy(dst, src)
	}
	var total int64
	for {
		avail, err := waitQueued(raw)
		if err != nil {
			return total, err
		}
		if avail == 0 { // readable with nothing queued: the peer closed
			n, err := io.Copy(dst, src)
			return total + n, err
		}
		n, err := io.Copy(dst, &io.LimitedReader{R: src, N: int64(avail)})
		total += n
		if err != nil {
			return total, err
		}
	}
}

type syscallConn = interface {
	Read(func(fd uintptr) bool) error
}

func rawConn(c net.Conn) (syscallConn, error) {
	switch c := c.(type) {
	case *net.TCPConn:
		return c.SyscallConn()
	case *net.UnixConn:
		return c.SyscallConn()
	}
	return nil, nil
}

// waitQueued blocks, in the runtime's poller and without reading, until src
// is readable, and returns how many bytes are queued on it; 0 means the
// peer closed. The netpoller is edge-triggered, so readiness is judged by
// asking the socket (a peek), not by having been woken: a FIN or reset that
// arrived with the last bytes wakes no one again.
func waitQueued(raw syscallConn) (int, error) {
	var avail int
	var sockErr error
	peek := make([]byte, 1)
	err := raw.Read(func(fd uintptr) bool {
		var err error
		if avail, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ); err != nil {
			sockErr = err
			return true
		}
		if avail > 0 {
			return true
		}
		n, _, err := unix.Recvfrom(int(fd), peek, unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			return false // nothing yet: wait for readability
		case err != nil:
			sockErr = err // a reset
		case n > 0:
			avail = n // data arrived between the two calls
		}
		return true // n == 0: the peer closed
	})
	if err != nil {
		return 0, err
	}
	return avail, sockErr
}
