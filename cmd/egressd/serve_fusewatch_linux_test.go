package main

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FUSE opcodes and sizes this daemon answers (linux/fuse.h).
const (
	fuseLookup     = 1
	fuseForget     = 2
	fuseGetattr    = 3
	fuseInit       = 26
	fuseBatchForgt = 42
	fuseInHeader   = 40
	fuseOutHeader  = 16
)

// fuseThatGoesSilent mounts a FUSE file system whose daemon answers INIT,
// the root's GETATTR and the first lookups answered with ENOENT, then
// never answers again: the attacker's daemon. A walk through it gets a
// fast "no such file", so egressd takes the folder for one to watch, and
// the next call on it (inotify_add_watch, an open) waits in the kernel for
// good. abort (also run at cleanup) detaches the mount and closes the
// device, which ends the requests still waiting: a request the daemon
// has read waits in the kernel uninterruptibly, even for SIGKILL, so a
// process holding one cannot be reaped before abort.
func fuseThatGoesSilent(t *testing.T, lookups int) (mnt string, abort func()) {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("/dev/fuse is required in CI: %v", err)
		}
		t.Skipf("no /dev/fuse: %v", err)
	}
	mnt = t.TempDir()
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd)
	if err := unix.Mount("egressd-test-silent", mnt, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		if os.Getenv("CI") == "true" {
			t.Fatalf("mounting FUSE (root) is required in CI: %v", err)
		}
		t.Skipf("cannot mount FUSE: %v", err)
	}
	var stop [2]int // closed by abort: the daemon's poll wakes and it returns
	if err := unix.Pipe2(stop[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		answerThenGoSilent(fd, stop[0], lookups)
	}()
	var once sync.Once
	abort = func() {
		once.Do(func() {
			unix.Unmount(mnt, unix.MNT_DETACH)
			unix.Close(stop[1])
			wg.Wait()
			unix.Close(fd) // the last descriptor of the device: the kernel aborts the requests left
			unix.Close(stop[0])
		})
	}
	t.Cleanup(abort)
	return mnt, abort
}

// startServeOnSilentFUSE starts serve and has the mount aborted before
// the process is killed at cleanup (cleanups run last first).
func startServeOnSilentFUSE(t *testing.T, cfg string, abort func()) *serveBinary {
	t.Helper()
	sb := startServeBinary(t, cfg)
	t.Cleanup(abort)
	return sb
}

// stopsOnSIGTERMWhileStuck: serve handles SIGTERM while its calls on the
// mount are stuck (it writes the audit chain's end), and exits cleanly
// once the kernel lets its stuck threads go.
func (sb *serveBinary) stopsOnSIGTERMWhileStuck(t *testing.T, auditLog string, abort func()) {
	t.Helper()
	sb.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, &lockedFile{path: auditLog}, `"action":"stop"`)
	abort()
	select {
	case err := <-sb.done:
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, sb.stderr.String())
		}
	case <-time.After(20 * time.Second): // bounds a failure only
		t.Fatalf("serve did not exit once the mount was aborted\n%s", sb.stderr.String())
	}
}

// answerThenGoSilent is the daemon's loop: it reads every request and
// answers only INIT, GETATTR of the root and the first lookups (ENOENT).
// It returns once stop becomes readable (its write end closed).
func answerThenGoSilent(fd, stop, lookups int) {
	le := binary.LittleEndian
	reply := func(unique uint64, errno int32, body []byte) {
		out := make([]byte, fuseOutHeader, fuseOutHeader+len(body))
		le.PutUint32(out[0:], uint32(fuseOutHeader+len(body)))
		le.PutUint32(out[4:], uint32(errno))
		le.PutUint64(out[8:], unique)
		unix.Write(fd, append(out, body...))
	}
	buf := make([]byte, 1<<20+4096)
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(stop), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return
		}
		if fds[1].Revents != 0 || fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			return
		}
		if fds[0].Revents&unix.POLLIN == 0 {
			continue
		}
		n, err := unix.Read(fd, buf)
		if err != nil {
			return
		}
		if n < fuseInHeader {
			continue
		}
		op, unique, node := le.Uint32(buf[4:]), le.Uint64(buf[8:]), le.Uint64(buf[16:])
		switch {
		case op == fuseInit:
			body := make([]byte, 64) // fuse_init_out
			le.PutUint32(body[0:], 7)
			le.PutUint32(body[4:], 31)
			le.PutUint32(body[8:], le.Uint32(buf[fuseInHeader+8:])) // max_readahead as asked
			le.PutUint16(body[16:], 16)                             // max_background
			le.PutUint16(body[18:], 12)                             // congestion_threshold
			le.PutUint32(body[20:], 128<<10)                        // max_write
			le.PutUint32(body[24:], 1)                              // time_gran
			le.PutUint16(body[28:], 32)                             // max_pages
			reply(unique, 0, body)
		case op == fuseGetattr && node == 1 && lookups > 0:
			body := make([]byte, 16+88) // fuse_attr_out: valid, then fuse_attr
			le.PutUint64(body[0:], 3600)
			le.PutUint64(body[16:], 1)             // ino
			le.PutUint32(body[16+48+12:], 0o40755) // mode: a folder
			le.PutUint32(body[16+48+16:], 2)       // nlink
			le.PutUint32(body[16+48+32:], 4096)    // blksize
			reply(unique, 0, body)
		case op == fuseLookup && lookups > 0:
			lookups--
			reply(unique, -int32(unix.ENOENT), nil)
		}
		// FORGET and BATCH_FORGET take no answer; everything else gets none.
	}
}

// linkIntoSilentFUSE replaces the folder's manifest.json, atomically, by
// a link to sub/manifest.json in mnt, as the integration's author can.
func linkIntoSilentFUSE(t *testing.T, folder, mnt string) {
	t.Helper()
	tmp := filepath.Join(folder, "manifest.json.new")
	if err := os.Symlink(filepath.Join(mnt, "sub", "manifest.json"), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(folder, "manifest.json")); err != nil {
		t.Fatal(err)
	}
}

// TestServeStartsWhileAWatchOfAFUSEFolderHangs is issue 17's tenth-round
// start attack: the hostile integration's manifest links into a FUSE
// mount that answers the first lookup (ENOENT) and then nothing. The
// watcher's bounded walk got the fast ENOENT, so the watcher took the
// mount's sub folder for one to watch, and its inotify_add_watch blocked
// forever inside serve's start, before any listener opened: the neighbour
// never served, /readyz never answered, SIGTERM was ignored.
func TestServeStartsWhileAWatchOfAFUSEFolderHangs(t *testing.T) {
	mnt, abort := fuseThatGoesSilent(t, 1)
	f := newTwoIntegrations(t)
	linkIntoSilentFUSE(t, f.hostile, mnt)
	sb := startServeOnSilentFUSE(t, f.cfg, abort)
	waitFor(t, sb.stderr, `serving com\.test\.victim on`)
	if got := unixConnectReason(t, f.victimSock, "v.example"); got != "dns_error" {
		t.Fatalf("the neighbour: %s, want dns_error (allowed)\n%s", got, sb.stderr.String())
	}
	if reason, _ := refusalOn(t, f.hostSock, "h.example"); reason != "manifest_not_loaded" {
		t.Fatalf("the hostile integration: %s, want manifest_not_loaded", reason)
	}
	code, body := readyz(t, sb.admin)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, f.hostile) {
		t.Fatalf("/readyz with the hostile integration not loaded: %d %s", code, body)
	}
	sb.stopsOnSIGTERMWhileStuck(t, f.audit, abort)
}

// TestAStuckWatchOfOneIntegrationDoesNotStopAnothersFileReload: the same
// link swapped in after start, with no SIGHUP. The watcher's check hung in
// inotify_add_watch for good, so no later file change reloaded anything:
// the neighbour's narrowing, written to its file (a sidecar has no
// SIGHUP), never applied. Now the stuck watch is given up at its deadline,
// the neighbour's narrowing applies from the file write alone, and
// /readyz names the watch that does not answer.
func TestAStuckWatchOfOneIntegrationDoesNotStopAnothersFileReload(t *testing.T) {
	mnt, abort := fuseThatGoesSilent(t, 1)
	f := newTwoIntegrations(t)
	sb := startServeOnSilentFUSE(t, f.cfg, abort)
	waitFor(t, sb.stderr, `serving com\.test\.victim on`)
	waitFor(t, sb.stderr, `serving com\.test\.hostile on`)

	linkIntoSilentFUSE(t, f.hostile, mnt)
	// The swap is seen by the watch: a reload of the hostile, which keeps
	// its last good policy, and a watch of the mount's folder that hangs.
	waitFor(t, &lockedFile{path: f.audit}, `"integration":"com.test.hostile"[^\n]*"action":"kept_last_good"`)
	erpFolder(t, f.victim, "com.test.victim", "1.0.1", "v.example") // narrowing by file write only
	waitFor(t, &lockedFile{path: f.audit}, `"integration":"com.test.victim","integration_version":"1.0.1"[^\n]*"action":"loaded"`)
	if got := unixConnectReason(t, f.victimSock, "old.v.example"); got != "not_allowlisted" {
		t.Fatalf("the neighbour's narrowing by file did not apply while a watch is stuck: %s\n%s", got, sb.stderr.String())
	}
	readyzNamesStuckWatch(t, sb.admin, "watch "+filepath.Join(f.hostile, "manifest.json"))

	if n := threadsWaitingOnFUSE(t, sb.cmd.Process.Pid); n > 5 {
		t.Fatalf("%d threads wait on the mount", n)
	}
	sb.stopsOnSIGTERMWhileStuck(t, f.audit, abort)
}

// readyzNamesStuckWatch waits for /readyz to name the watch key as not
// answering. A watch is stuck when its deadline passes with no event to
// wait on, so this polls /readyz, the state itself, within a bound far
// above the deadline.
func readyzNamesStuckWatch(t *testing.T, admin, key string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := readyz(t, admin)
		if code == http.StatusServiceUnavailable && strings.Contains(body, "file watch not answering") && strings.Contains(body, key) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never named the stuck %q: %d %s", key, code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
