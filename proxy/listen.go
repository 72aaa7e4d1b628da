package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/egressd/egressd/policy"
)

// Listen opens a listener for addr: "host:port" (TCP) or "unix:/path.sock".
// A unix socket is created with mode 0660 and removed when the listener is
// closed; with peers set, only those uids and gids may connect (checked with
// SO_PEERCRED on each accepted connection, which is closed otherwise, and
// reported to refused if it is not nil).
//
// TCP listeners are single-tenant: any local user can reach one. On a shared
// host, use unix sockets with allowed peers.
func Listen(ctx context.Context, addr string, peers policy.Peers, refused func(uid, gid uint32)) (net.Listener, error) {
	path, isUnix := strings.CutPrefix(addr, "unix:")
	if !isUnix {
		lc := tcpListenConfig()
		return lc.Listen(ctx, "tcp", addr)
	}
	if err := removeStaleSocket(ctx, path); err != nil {
		return nil, err
	}
	ln, err := listenUnix(ctx, path)
	if err != nil {
		return nil, err
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // ownedSocket unlinks only its own socket
	own, err := ownSocket(ul, path)
	if err != nil {
		return nil, err
	}
	if len(peers.UIDs)+len(peers.GIDs) == 0 {
		return own, nil
	}
	return &peerListener{ownedSocket: own, peers: peers, refused: refused}, nil
}

// peerListener accepts only peers whose credentials are allowed. Accept
// returns the raw *net.UnixConn, so the tunnel still splices.
type peerListener struct {
	*ownedSocket
	peers   policy.Peers
	refused func(uid, gid uint32) // may be nil
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.UnixListener.AcceptUnix()
		if err != nil {
			return nil, err
		}
		uid, gid, err := peerCred(c)
		if err == nil && l.allowed(uid, gid) {
			return c, nil
		}
		c.Close()
		if l.refused != nil {
			l.refused(uid, gid)
		}
	}
}

func (l *peerListener) allowed(uid, gid uint32) bool {
	for _, u := range l.peers.UIDs {
		if u == uid {
			return true
		}
	}
	for _, g := range l.peers.GIDs {
		if g == gid {
			return true
		}
	}
	return false
}

// ErrNoPeerCred is returned where the platform cannot tell who connected.
var ErrNoPeerCred = errors.New("peer credentials unavailable")

func listenUnix(ctx context.Context, path string) (net.Listener, error) {
	old := umask(0o117) // the socket is created 0660
	defer umask(old)
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
