package proxy

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/egressd/egressd/policy"
)

// TestListenDoesNotUnlinkALiveSocket: another process's live socket at the
// path is not "stale"; Listen refuses and the live socket keeps its path.
func TestListenDoesNotUnlinkALiveSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "victim.sock")
	victim, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	ln, err := Listen(context.Background(), "unix:"+path, policy.Peers{}, nil)
	if err == nil {
		ln.Close()
		t.Fatal("Listen took over a live socket's path")
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the live socket lost its path: %v", err)
	}
	c.Close()
}

// TestListenDoesNotUnlinkAFileThatIsNotASocket: a regular file at the path
// is the operator's, not a stale socket.
func TestListenDoesNotUnlinkAFileThatIsNotASocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "victim.sock")
	os.WriteFile(path, []byte("keep"), 0o600)
	if ln, err := Listen(context.Background(), "unix:"+path, policy.Peers{}, nil); err == nil {
		ln.Close()
		t.Fatal("Listen replaced a regular file")
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "keep" {
		t.Fatalf("the file was removed: %q %v", data, err)
	}
}

// TestListenReplacesAStaleSocket: a socket nobody listens on (an earlier
// run that died) is removed and the path bound again.
func TestListenReplacesAStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stale.sock")
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close()
	ln, err := Listen(context.Background(), "unix:"+path, policy.Peers{}, nil)
	if err != nil {
		t.Fatalf("a stale socket blocked the listener: %v", err)
	}
	ln.Close()
}

// TestClosingAListenerLeavesAnotherSocketAtItsPath: the path was taken
// over after this listener bound it; closing unlinks only its own socket.
func TestClosingAListenerLeavesAnotherSocketAtItsPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "victim.sock")
	for _, peers := range []policy.Peers{{}, {UIDs: []uint32{uint32(os.Getuid())}}} {
		ln, err := Listen(context.Background(), "unix:"+path, peers, nil)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(path)
		other, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		var before syscall.Stat_t
		syscall.Lstat(path, &before)
		ln.Close()
		var after syscall.Stat_t
		if err := syscall.Lstat(path, &after); err != nil || after.Ino != before.Ino {
			t.Fatalf("closing the first listener unlinked the socket now at its path: %v", err)
		}
		other.Close()
	}
}
