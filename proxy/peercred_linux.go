package proxy

import (
	"net"

	"golang.org/x/sys/unix"
)

func peerCred(c *net.UnixConn) (uid, gid uint32, err error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var gerr error
	if err := rc.Control(func(fd uintptr) { cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return 0, 0, err
	}
	if gerr != nil {
		return 0, 0, gerr
	}
	return cred.Uid, cred.Gid, nil
}

func umask(m int) int { return unix.Umask(m) }
