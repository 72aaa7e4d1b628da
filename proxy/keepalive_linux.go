package proxy

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Keep-alive for client connections, Go's own defaults: first probe after
// 15 s idle, then every 15 s, given up after 9.
const (
	keepAliveIdleSeconds     = 15
	keepAliveIntervalSeconds = 15
	keepAliveProbes          = 9
)

// tcpListenConfig sets keep-alive once, on the listening socket, where
// Linux copies it to every connection accepted from it, instead of Go's
// four setsockopt calls on each accepted connection. The connection ends
// up as Go would leave it; a dead client is still found.
func tcpListenConfig() net.ListenConfig {
	return net.ListenConfig{
		KeepAlive: -1, // Go sets nothing per connection: the listener's options are inherited
		Control: func(_, _ string, c syscall.RawConn) error {
			var sysErr error
			err := c.Control(func(fd uintptr) {
				for _, o := range []struct{ level, opt, v int }{
					{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
					{unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, keepAliveIdleSeconds},
					{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, keepAliveIntervalSeconds},
					{unix.IPPROTO_TCP, unix.TCP_KEEPCNT, keepAliveProbes},
				} {
					if sysErr = unix.SetsockoptInt(int(fd), o.level, o.opt, o.v); sysErr != nil {
						return
					}
				}
			})
			if err != nil {
				return err
			}
			return sysErr
		},
	}
}
