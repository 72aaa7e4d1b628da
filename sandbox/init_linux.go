package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// InitArg is the argument that makes the egressd binary run as the
// sandbox's init. The supervisor re-executes itself with it; nothing else
// should.
const InitArg = "__egressd-sandbox-init"

// nisDomainname is the sandbox's NIS domain name: the kernel's default.
const nisDomainname = "(none)"

// Fixed fds the supervisor hands the init.
const (
	fdControl  = 3
	fdLiveness = 4
)

// stepError names the setup step that failed.
type stepError struct {
	step string
	err  error
}

func (e *stepError) Error() string { return e.step + ": " + e.err.Error() }

func step(name string, err error) error {
	if err == nil {
		return nil
	}
	return &stepError{step: name, err: err}
}

// InitMain is the sandbox's pid 1. It builds the network, hands its
// listeners to the supervisor, builds the filesystem, hardens itself,
// starts the target in a session of its own, forwards signals, reaps orphans,
// and exits with the target's status (128+signal for a signal). If the
// supervisor goes away, it kills everything in the sandbox at once.
func InitMain() int {
	ctl := control{f: os.NewFile(fdControl, "control")}
	fail := func(err error) int {
		var se *stepError
		m := message{Error: err.Error()}
		if errors.As(err, &se) {
			m.Step, m.Error = se.step, se.err.Error()
		}
		ctl.send(m)
		return 125
	}
	// No inherited fd but 0, 1, 2 may reach the target: mark the rest
	// close-on-exec before anything else opens.
	if err := markInheritedCloexec(); err != nil {
		return fail(step("close_range", err))
	}
	if err := makeUndumpable(); err != nil {
		return fail(err)
	}
	m, pathFDs, err := ctl.recv()
	tun := -1
	if err == nil && m.Tun && len(pathFDs) > 0 {
		tun, pathFDs = pathFDs[len(pathFDs)-1], pathFDs[:len(pathFDs)-1]
	}
	if err != nil || m.Spec == nil || len(pathFDs) != len(m.Paths) {
		return fail(step("read spec", fmt.Errorf("no spec from the supervisor: %v", err)))
	}
	spec := *m.Spec
	for i, p := range m.Paths {
		opened[p] = source{fd: pathFDs[i], detached: true}
	}
	if err := bringUpLoopback(); err != nil {
		return fail(err)
	}
	if err := boundConnections(spec.Limits.TCPConnections()); err != nil {
		return fail(step("TCP connection bound", err))
	}
	names, files, err := openListeners(spec.CapturePorts)
	if err != nil {
		return fail(err)
	}
	// After egressd's own listeners, which keep the host's backlog: the
	// kernel clamps a backlog to somaxconn at listen().
	if err := writeFile(somaxconnPath, strconv.Itoa(Somaxconn)); err != nil {
		return fail(step("listen backlog bound", err))
	}
	egress, err := openEgress(tun)
	if err != nil {
		return fail(err)
	}
	names, files = append(names, nameEgress), append(files, egress)
	if layerOff("setup") { // a test's stall: the supervisor's setup timer must end it
		time.Sleep(time.Hour)
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	err = ctl.send(message{Listeners: names}, fds...)
	for _, f := range files {
		f.Close() // through the *os.File, so no finalizer closes a reused fd later
	}
	if err != nil {
		return fail(step("pass listeners", err))
	}
	if m, _, err := ctl.recv(); err != nil || !m.Go {
		return fail(step("wait for supervisor", fmt.Errorf("no go-ahead: %v", err)))
	}
	if err := buildRoot(spec); err != nil {
		return fail(err)
	}
	// The count is read through the sandbox's own /proc, opened after the
	// pivot: one opened before would be a descriptor into the host's /proc
	// that the init holds for the sandbox's life.
	sockets, err := openSocketWatch(spec.Limits.TCPConnections())
	if err != nil {
		return fail(step("TCP socket count", err))
	}
	if err := unlessOff("userns-limit", limitUserNamespace); err != nil {
		return fail(step("user namespace limits", err))
	}
	if err := unix.Sethostname([]byte(Hostname)); err != nil {
		return fail(step("hostname", err))
	}
	// The new UTS namespace starts with a copy of the host's NIS domain
	// name; "(none)" is what a kernel that was never given one reports.
	if err := unix.Setdomainname([]byte(nisDomainname)); err != nil {
		return fail(step("domainname", err))
	}
	go watchLiveness()
	// Listen for SIGCHLD before the target exists, so a target that exits
	// at once is not missed.
	sigs := catchSignals()
	// The sandbox is one session, the init's and not the launcher's: it
	// has no controlling terminal, and it is the sandbox's one scheduler
	// group where the kernel's autogroup is the CPU bound. Its programs
	// may not start another (setsidRule), so the target starts as a
	// process group leader in this one.
	if _, err := unix.Setsid(); err != nil {
		return fail(step("own session", err))
	}
	target, err := startTarget(spec)
	if err != nil {
		return fail(err)
	}
	ctl.send(message{Started: target})
	go sockets.run()
	code := superviseTarget(target, sigs)
	ctl.send(message{Exited: &code, Breach: sockets.reason()}) // without it, the supervisor knows the init itself died
	return code
}

// bringUpLoopback sets lo up, bounds TCP buffers and turns IPv6 off: the namespace has no other
// interface and no route, so every connect that is not to loopback fails at
// once with ENETUNREACH.
func bringUpLoopback() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return step("loopback up", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return step("loopback up", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return step("loopback up", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return step("loopback up", err)
	}
	// Socket buffers in this namespace are charged to the host's single
	// tcp_mem pool: cap each socket's (the defaults allow 6 MB and 4 MB).
	for f, v := range tcpBuffers {
		if err := writeFile(f, v); err != nil {
			return step("TCP buffer bounds", err)
		}
	}
	if err := writeFile(optMemMax, strconv.Itoa(OptMemBytes)); err != nil {
		return step("socket option memory bound", err)
	}
	for _, f := range []string{"/proc/sys/net/ipv6/conf/all/disable_ipv6", "/proc/sys/net/ipv6/conf/default/disable_ipv6", "/proc/sys/net/ipv6/conf/lo/disable_ipv6"} {
		if err := writeFile(f, "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return step("disable IPv6", err)
		}
	}
	return nil
}

// tcpBuffers are the sandbox namespace's TCP buffer sizes (min, default,
// max), per namespace since Linux 4.15: a connection holds at most 256 KiB
// each way unless the program asks for more with SO_RCVBUF/SO_SNDBUF, which
// the host's global net.core.rmem_max and wmem_max bound.
var tcpBuffers = map[string]string{
	"/proc/sys/net/ipv4/tcp_rmem": "4096 87380 262144",
	"/proc/sys/net/ipv4/tcp_wmem": "4096 16384 262144",
}

// optMemMax is net.core.optmem_max, per network namespace: the most
// option memory (sock_kmalloc: socket filters, IP options, IPv6 sticky
// options and routing headers, multicast memberships and source lists,
// control messages being sent) one socket holds. The kernel charges it to
// no memory cgroup, and a socket need not be bound or connected to hold
// it, so no count of connections or sockets in use sees it; the host's
// 128 KiB let 8 processes take 1.4 GB. OptMemBytes says why 1 KiB.
const optMemMax = "/proc/sys/net/core/optmem_max"

// somaxconnPath is net.core.somaxconn, per network namespace: the longest
// accept queue a listener may ask for.
const somaxconnPath = "/proc/sys/net/core/somaxconn"

// openListeners creates, inside the sandbox's network namespace, the
// listeners the supervisor will serve, and returns them as files.
func openListeners(ports []uint16) ([]string, []*os.File, error) {
	var names []string
	var files []*os.File
	add := func(name string, f *os.File, err error) error {
		if err != nil {
			return step("listen "+name, err)
		}
		names, files = append(names, name), append(files, f)
		return nil
	}
	tcp := func(addr string) (*os.File, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		return ln.(*net.TCPListener).File()
	}
	f, err := tcp(ProxyAddr)
	if err := add(nameProxy, f, err); err != nil {
		return nil, nil, err
	}
	for _, p := range ports {
		f, err := tcp("0.0.0.0:" + strconv.Itoa(int(p)))
		if err := add(capturePrefix+strconv.Itoa(int(p)), f, err); err != nil {
			return nil, nil, err
		}
	}
	pc, err := net.ListenPacket("udp", DNSAddr)
	if err != nil {
		return nil, nil, step("listen "+nameDNSU, err)
	}
	uf, err := pc.(*net.UDPConn).File()
	pc.Close()
	if err := add(nameDNSU, uf, err); err != nil {
		return nil, nil, err
	}
	f, err = tcp(DNSAddr)
	if err := add(nameDNST, f, err); err != nil {
		return nil, nil, err
	}
	return names, files, nil
}

// watchLiveness kills everything in the sandbox when the supervisor's end
// of the liveness pipe closes: the supervisor died, so nothing may run
// unsupervised. Pdeathsig covers the init itself.
func watchLiveness() {
	live := os.NewFile(fdLiveness, "liveness")
	buf := make([]byte, 1)
	live.Read(buf) // returns only at EOF
	unix.Kill(-1, unix.SIGKILL)
	os.Exit(137)
}

// startTarget starts the target from a locked OS thread that has dropped
// every capability, set no_new_privs and installed the seccomp filter;
// capabilities and filters are per thread, and the child inherits this
// thread's. The thread stays locked, so it is never reused.
func startTarget(spec Spec) (int, error) {
	type result struct {
		pid int
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unlessOff("cgroupns", hideHostCgroups); err != nil {
			done <- result{err: step("cgroup namespace", err)}
			return
		}
		if err := unlessOff("caps", dropPrivileges); err != nil {
			done <- result{err: step("drop privileges", err)}
			return
		}
		if err := unlessOff("landlock", func() error { return restrictFilesystem(spec) }); err != nil {
			done <- result{err: step("landlock", err)}
			return
		}
		if err := setRlimits(spec.Limits); err != nil { // before seccomp, which may deny prlimit
			done <- result{err: step("limits", err)}
			return
		}
		if err := unlessOff("seccomp", func() error { return installSeccomp(spec.AllowSetsid) }); err != nil {
			done <- result{err: step("seccomp", err)}
			return
		}
		// Nice is per thread on Linux; the target inherits this one's.
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, Nice); err != nil {
			done <- result{err: step("nice", err)}
			return
		}
		// A process group in the init's session: the filter may refuse
		// setsid in the forked child.
		cmd := &exec.Cmd{Path: spec.Command, Args: spec.Args, Dir: spec.Dir, Env: spec.Env,
			Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
			SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}}
		if err := cmd.Start(); err != nil {
			done <- result{err: step("start "+spec.Command, err)}
			return
		}
		done <- result{pid: cmd.Process.Pid}
		select {} // keep the thread (and so the child's parent-death signal) alive
	}()
	r := <-done
	return r.pid, r.err
}

// hideHostCgroups gives this thread, and so the target it forks, a cgroup
// namespace of its own, rooted at the group the init is in: the
// sandbox's, which the supervisor moved the init into before it sent the
// spec. /proc/self/cgroup then shows "/" rather than the host's paths, the
// launcher's group and egressd's host pid in the group's name; where no
// group was made (a normal user), the launcher's path is hidden the same
// way. Namespaces are per thread (the nsproxy), so it is done on the
// thread that starts the target, while it still has CAP_SYS_ADMIN in the
// sandbox's user namespace.
func hideHostCgroups() error { return unix.Unshare(unix.CLONE_NEWCGROUP) }

// superviseTarget forwards SIGINT, SIGTERM and SIGHUP to the target's
// session, reaps every orphan, and returns the target's exit status.
func superviseTarget(target int, sigs initSignals) int {
	sig := os.Signal(unix.SIGCHLD) // reap once first: the target may be gone already
	for {
		if sig != unix.SIGCHLD {
			unix.Kill(-target, sig.(syscall.Signal)) // its session's process group
			sig = sigs.next()
			continue
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			if pid != target {
				continue
			}
			code := ws.ExitStatus()
			if ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			unix.Kill(-1, unix.SIGKILL) // nothing outlives the target
			return code
		}
		sig = sigs.next()
	}
}

func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(value)
	return err
}
