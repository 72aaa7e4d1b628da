package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/egressd/egressd/internal/linejoin"
)

// Options are the supervisor's choices for one sandbox.
type Options struct {
	// HostUID and HostGID are the host ids the sandbox's root maps to. As
	// root, pass the integration's own unprivileged uid (ClaimStateFolder),
	// never a shared 65534. As a normal user, pass your own ids: a
	// single-id map.
	HostUID, HostGID int
	// StateMount, when set (root only), is a detached mount bound at
	// StateDir instead of the folder Spec.StateDir names: the state image
	// MountStateImage made. Start passes it on; the caller closes it.
	StateMount *os.File
	// Folder is the integration folder (Spec.Dir), opened once with
	// OpenFolder before its manifest was read. What is bound at Spec.Dir is
	// this very folder, whatever the path names by then. Start opens
	// Spec.Dir itself if it is nil; the caller closes it.
	Folder *os.File
	// Key names the sandbox's cgroup (with the supervisor's pid): the
	// integration's state name.
	Key string
	// Stderr, when set, is the joint the relay of the program's output to
	// egressd's stderr writes through, so that egressd's own lines, written
	// through Stderr.Own, never continue a line the program left open.
	Stderr *linejoin.Joint
}

// Sandbox is a running sandboxed process tree and the listeners created
// inside it, which the supervisor serves.
type Sandbox struct {
	Proxy   net.Listener            // the explicit proxy, 127.0.0.1:3128 inside
	Capture map[uint16]net.Listener // transparent capture, by port
	DNSUDP  net.PacketConn          // 127.0.0.53:53 inside
	DNSTCP  net.Listener
	// Egress is the TUN file behind the sandbox's default routes: serve it
	// with ServeEgress, so every direct attempt is audited and refused.
	Egress *os.File

	egressStats *os.File // the sandbox's /proc/net/dev, see EgressDropped
	// outputDrained is closed once the program's relayed stdout and
	// stderr are written out; killed, once Kill was called, after which
	// Wait no longer waits for them (a peer that stopped reading).
	outputDrained <-chan struct{}
	killed        chan struct{}
	killOnce      sync.Once
	cmd           *exec.Cmd
	cgroup        *cgroup
	initScore     string // the init's oom_score_adj, set back once the target runs
	ctl           control
	live          *os.File
	done          chan int
	exit          exitReport
	setup         *time.Timer // SetupTimeout, stopped once the target runs
	stalled       atomic.Bool // the timer fired and killed the init
}

// SetupTimeout bounds the init's setup, from its start to the target's:
// a setup that stalls (a kernel quota of the launcher's uid starved by
// another process) is killed and reported, never waited on for ever.
var SetupTimeout = 60 * time.Second

// ErrNamespaces means the kernel refused to create the namespaces.
var ErrNamespaces = errors.New("cannot create namespaces")

// Start launches the sandbox's init, which creates the namespaces and the
// listeners, and returns once the listeners are in hand. Call Run to let
// the target start, after the listeners are being served.
func Start(spec Spec, opts Options) (*Sandbox, error) {
	if err := checkStdio(); err != nil {
		return nil, err
	}
	folder := opts.Folder
	if folder == nil {
		f, err := OpenFolder(spec.Dir)
		if err != nil {
			return nil, fmt.Errorf("sandbox: integration folder: %w", err)
		}
		defer f.Close()
		folder = f
	}
	if err := testSwapLink(); err != nil {
		return nil, fmt.Errorf("sandbox: test hook: %w", err)
	}
	// A normal user's init opens the folder in its own mount namespace (a
	// descriptor from this one cannot be bound there): it must find this
	// very folder, or refuse.
	var err error
	if spec.DirID, err = fileID(int(folder.Fd())); err != nil {
		return nil, fmt.Errorf("sandbox: integration folder: %w", err)
	}
	// Every fd this process inherited from its launcher stays here: a
	// socket leaked to egressd must not carry the host network inside.
	if err := markInheritedCloexec(); err != nil {
		return nil, fmt.Errorf("sandbox: close_range: %w", err)
	}
	if err := spec.Limits.check(); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	cg, err := openCgroup(opts.Key, spec.Limits)
	if err != nil {
		return nil, err
	}
	std, err := newStdio(int64(spec.Limits.FileSizeMB)<<20, opts.Stderr) // a socket, a file or a device is relayed through a pipe
	if err != nil {
		cg.remove()
		return nil, err
	}
	var pair [2]int
	pair, err = unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		std.closeAll()
		cg.remove()
		return nil, fmt.Errorf("sandbox: socketpair: %w", err)
	}
	parentCtl, childCtl := os.NewFile(uintptr(pair[0]), "control"), os.NewFile(uintptr(pair[1]), "control")
	liveR, liveW, err := os.Pipe()
	if err != nil {
		std.closeAll()
		cg.remove()
		parentCtl.Close()
		childCtl.Close()
		return nil, fmt.Errorf("sandbox: liveness pipe: %w", err)
	}
	cmd := &exec.Cmd{
		// /proc/self/exe is a magic link to this very binary: the init runs
		// the same code even if the file was replaced, and the sandbox's
		// unprivileged user needs no search permission on its folder.
		Path:       "/proc/self/exe",
		Args:       []string{"egressd-init", InitArg},
		Env:        initEnv(),
		Stdin:      std.files[0],
		Stdout:     std.files[1],
		Stderr:     std.files[2],
		ExtraFiles: []*os.File{childCtl, liveR}, // fds 3 and 4
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET | syscall.CLONE_NEWNS |
				syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: opts.HostUID, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: opts.HostGID, Size: 1}},
			Pdeathsig:   syscall.SIGKILL,
		},
	}
	if os.Geteuid() == 0 {
		// Root: drop the supplementary groups (root's own) before anything
		// runs inside; setgroups is allowed for that, in the new namespace.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = true
	}
	sb := &Sandbox{cmd: cmd, ctl: control{f: parentCtl}, live: liveW, done: make(chan int, 1), exit: newExitReport(),
		killed: make(chan struct{}), cgroup: cg}
	started := make(chan error, 1)
	// Pdeathsig fires when the thread that forked the child exits
	// (golang/go#27505), so that thread stays locked for the child's life.
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		code := exitCode(cmd.Wait())
		cg.remove() // the init is gone, and every task of its PID namespace with it
		sb.done <- code
		close(sb.exit.gone)
	}()
	err = <-started
	childCtl.Close()
	liveR.Close()
	if err != nil {
		std.closeAll()
		cg.remove()
		return nil, namespaceError(err)
	}
	std.started()
	sb.outputDrained = std.drained()
	if err := cg.enter(cmd.Process.Pid); err != nil {
		sb.Kill()
		return nil, err
	}
	if sb.initScore, err = cg.markTargetFirst(cmd.Process.Pid); err != nil {
		sb.Kill()
		return nil, err
	}
	sb.setup = time.AfterFunc(SetupTimeout, func() {
		sb.stalled.Store(true)
		sb.Kill()
	})
	// As root, the supervisor clones the folders to bind as detached mounts:
	// the sandbox's own unprivileged user may not be able to reach them (a
	// folder under /root, a 0700 state root). A normal user's sandbox runs
	// as that user and opens them itself.
	var paths []string
	var fds []int
	if os.Geteuid() == 0 {
		paths = append(append([]string{}, spec.ReadOnly...), spec.StateDir)
		clone := paths
		if opts.StateMount != nil {
			clone = spec.ReadOnly
		}
		if fds, err = cloneMounts(clone, spec.Dir, folder); err != nil {
			sb.Kill()
			return nil, err
		}
		if opts.StateMount != nil {
			fds = append(fds, int(opts.StateMount.Fd())) // sent, not closed here: the caller's
		}
		var tun int
		if tun, err = openTunIn(cmd.Process.Pid); err == nil {
			fds = append(fds, tun)
		}
	}
	if err == nil {
		if err = sb.ctl.send(message{Spec: &spec, Paths: paths, Tun: os.Geteuid() == 0}, fds...); err != nil {
			err = fmt.Errorf("sandbox: send spec: %w", err)
		}
	}
	for _, fd := range fds {
		if opts.StateMount == nil || fd != int(opts.StateMount.Fd()) {
			unix.Close(fd)
		}
	}
	if err != nil {
		sb.Kill()
		return nil, err
	}
	if err := sb.receiveListeners(); err != nil {
		sb.Kill()
		return nil, sb.setupError(err)
	}
	return sb, nil
}

// cloneMounts makes a detached copy of each path's mount tree
// (open_tree(OPEN_TREE_CLONE)), which the init can attach in its own mount
// namespace with move_mount.
// The integration folder, dir, is cloned from its descriptor, folder.
func cloneMounts(paths []string, dir string, folder *os.File) ([]int, error) {
	var fds []int
	for _, p := range paths {
		fd, err := -1, error(nil)
		if p == dir {
			fd, err = cloneFolder(folder)
		} else if fd, err = unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE); err != nil {
			err = fmt.Errorf("sandbox: open %s: %w", p, err)
		}
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return nil, err
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

func (sb *Sandbox) receiveListeners() error {
	m, fds, err := sb.ctl.recv()
	if err != nil {
		return fmt.Errorf("sandbox: init exited during setup: %w", err)
	}
	if m.Error != "" {
		return initError(m)
	}
	if len(fds) != len(m.Listeners) {
		return fmt.Errorf("sandbox: %d listeners named, %d passed", len(m.Listeners), len(fds))
	}
	sb.Capture = map[uint16]net.Listener{}
	for i, name := range m.Listeners {
		f := os.NewFile(uintptr(fds[i]), name)
		if name == nameEgress {
			sb.Egress = f
			if sb.egressStats, err = openEgressStats(sb.cmd.Process.Pid); err != nil {
				return fmt.Errorf("sandbox: egress0's counters: %w", err)
			}
			continue
		}
		var err error
		switch {
		case name == nameDNSU:
			sb.DNSUDP, err = net.FilePacketConn(f)
		case name == nameProxy:
			sb.Proxy, err = net.FileListener(f)
		case name == nameDNST:
			sb.DNSTCP, err = net.FileListener(f)
		case strings.HasPrefix(name, capturePrefix):
			var port int
			port, err = strconv.Atoi(strings.TrimPrefix(name, capturePrefix))
			if err == nil {
				sb.Capture[uint16(port)], err = net.FileListener(f)
			}
		}
		f.Close() // the net types hold their own dup
		if err != nil {
			return fmt.Errorf("sandbox: listener %s: %w", name, err)
		}
	}
	if sb.Proxy == nil || sb.DNSUDP == nil || sb.DNSTCP == nil || sb.Egress == nil {
		return errors.New("sandbox: init did not pass every listener")
	}
	return nil
}

// Run lets the init build the filesystem, harden itself and start the
// target. It returns once the target runs, or the step that failed.
func (sb *Sandbox) Run() error {
	if err := sb.ctl.send(message{Go: true}); err != nil {
		return sb.setupError(fmt.Errorf("sandbox: %w", err))
	}
	m, _, err := sb.ctl.recv()
	sb.setup.Stop()
	if err != nil {
		return sb.setupError(fmt.Errorf("sandbox: init exited during setup: %w", err))
	}
	if m.Error != "" {
		return initError(m)
	}
	return sb.cgroup.spareInit(sb.cmd.Process.Pid, sb.initScore)
}

// setupError says so plainly when err came from the setup timer's kill.
func (sb *Sandbox) setupError(err error) error {
	if !sb.stalled.Load() {
		return err
	}
	return fmt.Errorf("sandbox setup did not finish within %v, so egressd stopped it: the kernel may be refusing "+
		"the init something a quota of the launcher's uid bounds (pending signals: SigQ in /proc/self/status; "+
		"processes; inotify): %w", SetupTimeout, err)
}

// Wait returns the target's exit status: its code, or 128+signal. After
// it, InitDied says whether that status is really the init's own.
func (sb *Sandbox) Wait() int {
	code := <-sb.done
	sb.readExit()
	select {
	case <-sb.outputDrained:
	case <-sb.killed:
	}
	return code
}

// Signal forwards sig to the init, which passes it to the target's session.
func (sb *Sandbox) Signal(sig os.Signal) error { return sb.cmd.Process.Signal(sig) }

// Kill ends the whole sandbox at once.
func (sb *Sandbox) Kill() {
	sb.live.Close()
	sb.cmd.Process.Kill()
	sb.killOnce.Do(func() { close(sb.killed) })
}

// Close releases the supervisor's ends once the sandbox has exited.
func (sb *Sandbox) Close() {
	sb.live.Close()
	sb.ctl.f.Close()
	for _, ln := range sb.Capture {
		ln.Close()
	}
	if sb.Egress != nil {
		sb.Egress.Close()
	}
	if sb.egressStats != nil {
		sb.egressStats.Close()
	}
	for _, c := range []interface{ Close() error }{sb.Proxy, sb.DNSUDP, sb.DNSTCP} {
		if c != nil {
			c.Close()
		}
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 125
}

func initError(m message) error {
	return fmt.Errorf("sandbox setup failed at %q: %s", m.Step, m.Error)
}

// namespaceError explains a refused clone in words an operator can act on.
func namespaceError(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EUSERS) || errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%w: %v. This kernel or its configuration does not let this user create user namespaces "+
			"(check sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces, and AppArmor's "+
			"kernel.apparmor_restrict_unprivileged_userns). Ask the administrator to allow them for egressd, "+
			"run egressd run as root, or, knowing the program can then ignore the proxy, pass --insecure-env-only", ErrNamespaces, err)
	}
	return fmt.Errorf("sandbox: start init: %w", err)
}
