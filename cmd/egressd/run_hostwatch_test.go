package main

import (
	"bufio"
	"os"
	"runtime"
	"strings"
	"testing"
)

// hostWatcher is a child that watches a host file bound read-only into
// the sandbox with dnotify (fcntl F_NOTIFY on its folder), inotify (on its
// folder) and fanotify (an inode mark, FAN_REPORT_FID, which needs no
// privilege), says "ready", and reports the first open or access of the
// file each one sees. A call the sandbox refuses is
// reported with its errno instead.
const hostWatcher = `exec /usr/bin/python3 -c '
import ctypes, fcntl, os, platform, select, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
folder, name = os.path.split(sys.argv[1])
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGIO])
dnotify = os.open(folder, os.O_RDONLY)
try: fcntl.fcntl(dnotify, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT)
except OSError as e: print("fcntl(F_NOTIFY): " + e.strerror, flush=True); dnotify = None
def call(what, r):
    if r < 0:
        print("%s: %s" % (what, os.strerror(ctypes.get_errno())), flush=True)
        return None
    return r
if platform.machine() == "x86_64":
    legacy = call("inotify_init", libc.syscall(253))
    if legacy is not None: os.close(legacy)
ino = call("inotify_init1", libc.inotify_init1(0))
if ino is not None: call("inotify_add_watch", libc.inotify_add_watch(ino, folder.encode(), 0x20))
fan = call("fanotify_init", libc.fanotify_init(0x200, 0))
if fan is not None: call("fanotify_mark", libc.fanotify_mark(fan, 1, 0x20, -100, sys.argv[1].encode()))
print("ready", flush=True)
watching = [fd for fd in (ino, fan) if fd is not None]
while watching:
    for fd in select.select(watching, [], [])[0]:
        data = os.read(fd, 65536)
        if fd == fan:
            print("fanotify saw an open on the host", flush=True); watching.remove(fd)
        elif name.encode() + b"\0" in data:
            print("inotify saw the host open " + name, flush=True); watching.remove(fd)
if dnotify is not None:
    signal.sigwait([signal.SIGIO])
    print("dnotify saw an access in the host folder", flush=True)
' `

// TestRunChildCannotWatchHostActivityInBoundFolders: the folders bound
// read-only into the sandbox (/usr, /etc/ssl/certs) are the host's own
// inodes, and inotify and fanotify events are per inode, not per mount or
// namespace: a child watching them saw, live, every host process that ran
// a program or opened a file there, and two sandboxes could signal each
// other by opening files in a shared folder. Neither Landlock nor seccomp
// can tell the host's folders from the sandbox's own, so the calls are
// refused outright: inotify_init1 (and inotify_init) with ENOSYS, which
// tells a watcher the kernel has no such call (it must poll), and
// fanotify_init with EPERM. The test opens the watched host file once the child is ready;
// the child must not see it.
func TestRunChildCannotWatchHostActivityInBoundFolders(t *testing.T) {
	e := newSandboxEnv(t)
	const watched = "/usr/bin/env"
	cmd := e.command(hostWatcher + watched)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errs strings.Builder
	cmd.Stderr = &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	var said []string
	for lines.Scan() && lines.Text() != "ready" {
		said = append(said, lines.Text())
	}
	if f, err := os.Open(watched); err != nil { // the host's activity the child must not see
		t.Fatal(err)
	} else {
		f.Read(make([]byte, 1)) // an access, which dnotify reports (it has no open event)
		f.Close()
	}
	for lines.Scan() {
		said = append(said, lines.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("egressd: %v, stderr %s", err, errs.String())
	}
	want := []string{"fcntl(F_NOTIFY): Invalid argument", "inotify_init1: Function not implemented", "fanotify_init: Operation not permitted"}
	if runtime.GOARCH == "amd64" {
		want = append(want[:1:1], append([]string{"inotify_init: Function not implemented"}, want[1:]...)...)
	}
	if strings.Join(said, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the child said:\n%s\nwant:\n%s", strings.Join(said, "\n"), strings.Join(want, "\n"))
	}
}
