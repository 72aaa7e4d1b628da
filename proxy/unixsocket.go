package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
)

// removeStaleSocket clears path for a new unix listener when, and only
// when, what is there is a socket nobody listens on: an earlier run that
// died without unlinking it. A live socket is another listener's (another
// egressd, or another entry of this one): unlinking it would hand its
// clients to whoever binds next, so it is an error. Anything that is not a
// socket is left for bind to refuse.
func removeStaleSocket(ctx context.Context, path string) error {
	st, err := os.Lstat(path)
	if err != nil || st.Mode()&os.ModeSocket == 0 {
		return nil
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	switch {
	case err == nil:
		c.Close()
		return fmt.Errorf("listen %s: a live socket is already there (another listener accepts on it); egressd does not take over a socket in use", path)
	case errors.Is(err, syscall.ECONNREFUSED):
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("listen %s: removing a stale socket: %w", path, err)
		}
		return nil
	}
	return fmt.Errorf("listen %s: cannot tell whether the socket there is stale: %w", path, err)
}

// ownedSocket is a unix listener that, when closed, unlinks its path only
// if the path still names the socket it bound (same device and inode):
// once the path is someone else's socket, it is theirs to remove.
type ownedSocket struct {
	*net.UnixListener
	path     string
	dev, ino uint64
	once     sync.Once
}

func ownSocket(ul *net.UnixListener, path string) (*ownedSocket, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		ul.Close()
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return &ownedSocket{UnixListener: ul, path: path, dev: uint64(st.Dev), ino: st.Ino}, nil
}

// Close closes the listener, then unlinks its path if the path is still
// this listener's socket.
func (o *ownedSocket) Close() error {
	err := o.UnixListener.Close()
	o.once.Do(func() {
		var st syscall.Stat_t
		if syscall.Lstat(o.path, &st) == nil && uint64(st.Dev) == o.dev && st.Ino == o.ino {
			os.Remove(o.path)
		}
	})
	return err
}
