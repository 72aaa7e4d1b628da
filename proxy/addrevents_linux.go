package proxy

import (
	"context"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// addrEvents is a netlink route socket subscribed to address changes.
type addrEvents struct {
	f *os.File
}

// subscribeAddrEvents opens a NETLINK_ROUTE socket in the address groups
// of both families. It is non-blocking, so closing it (when ctx ends)
// wakes Wait.
func subscribeAddrEvents(ctx context.Context) (*addrEvents, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, os.NewSyscallError("socket AF_NETLINK", err)
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind netlink", err)
	}
	e := &addrEvents{f: os.NewFile(uintptr(fd), "netlink-route")}
	context.AfterFunc(ctx, func() { e.f.Close() })
	return e, nil
}

// Wait blocks until at least one address event arrives and drains what
// is queued. An overflow (ENOBUFS: events were lost) is an event too: the
// caller re-reads the whole list either way.
func (e *addrEvents) Wait() error {
	rc, err := e.f.SyscallConn()
	if err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	got := false
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			_, _, err := unix.Recvfrom(int(fd), buf, 0)
			switch {
			case err == nil, errors.Is(err, unix.ENOBUFS):
				got = true
				continue
			case errors.Is(err, unix.EAGAIN):
				return got // wait for more unless something came
			case errors.Is(err, unix.EINTR):
				continue
			default:
				rerr = err
				return true
			}
		}
	})
	if err != nil {
		return err
	}
	return rerr
}

func (e *addrEvents) Close() error { return e.f.Close() }
