package proxy

import (
	"context"
	"net"
	"testing"

	"github.com/egressd/egressd/policy"
	"golang.org/x/sys/unix"
)

// Keep-alive is set once on the listener, not per connection; a client
// that vanishes without a FIN must still be found, so every accepted
// connection carries the listener's keep-alive, as Go would have set it.
func TestAClientThatVanishesIsStillProbedByKeepalive(t *testing.T) {
	ln, err := Listen(context.Background(), "127.0.0.1:0", policy.Peers{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	raw, err := a.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		name       string
		level, opt int
		want       int
	}{
		{"SO_KEEPALIVE", unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1},
		{"TCP_KEEPIDLE", unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, keepAliveIdleSeconds},
		{"TCP_KEEPINTVL", unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, keepAliveIntervalSeconds},
		{"TCP_KEEPCNT", unix.IPPROTO_TCP, unix.TCP_KEEPCNT, keepAliveProbes},
		{"TCP_NODELAY", unix.IPPROTO_TCP, unix.TCP_NODELAY, 1},
	} {
		var got int
		var gerr error
		raw.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), o.level, o.opt) })
		if gerr != nil || got != o.want {
			t.Errorf("accepted connection: %s = %d (%v), want %d", o.name, got, gerr, o.want)
		}
	}
}
