package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/egressd/egressd/proxy/proxytest"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// execWithoutNetlinkEnv makes this test binary, started by
// runWithoutNetlink, load a seccomp filter that refuses AF_NETLINK sockets
// as systemd's RestrictAddressFamilies= does (EAFNOSUPPORT), then exec the
// egressd binary with the arguments in execArgsEnv.
const (
	execWithoutNetlinkEnv = "EGRESSD_TEST_EXEC_WITHOUT_NETLINK"
	execArgsEnv           = "EGRESSD_TEST_EXEC_ARGS"
)

func init() {
	bin := os.Getenv(execWithoutNetlinkEnv)
	if bin == "" {
		return
	}
	runtime.LockOSThread() // the filter is this thread's, and exec keeps it
	var args []string
	json.Unmarshal([]byte(os.Getenv(execArgsEnv)), &args)
	if err := refuseNetlinkSockets(); err != nil {
		fmt.Fprintln(os.Stderr, "seccomp:", err)
		os.Exit(99)
	}
	env := []string{}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, execWithoutNetlinkEnv+"=") && !strings.HasPrefix(e, execArgsEnv+"=") {
			env = append(env, e)
		}
	}
	err := syscall.Exec(bin, append([]string{bin}, args...), env)
	fmt.Fprintln(os.Stderr, "exec:", err)
	os.Exit(99)
}

// refuseNetlinkSockets loads a seccomp filter on this thread that answers
// socket(AF_NETLINK, …) with EAFNOSUPPORT, as RestrictAddressFamilies=
// does, and allows everything else.
func refuseNetlinkSockets() error {
	const (
		offNR   = 0  // seccomp_data.nr
		offArg0 = 16 // seccomp_data.args[0], low 32 bits on little endian
	)
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: offNR, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.SYS_SOCKET, SkipTrue: 3},
		bpf.LoadAbsolute{Off: offArg0, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.AF_NETLINK, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EAFNOSUPPORT)},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
	})
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); errno != 0 {
		return errno
	}
	return nil
}

// TestServeRefusesToStartWhereTheHostsAddressesCannotBeRead: under
// RestrictAddressFamilies= without AF_NETLINK, net.InterfaceAddrs fails;
// its error was dropped, the list was empty, and a name resolving to the
// proxy host's own address got "200 Connection established". Now egressd
// refuses to start and says why. The process runs under a real seccomp
// filter that refuses netlink sockets.
func TestServeRefusesToStartWhereTheHostsAddressesCannotBeRead(t *testing.T) {
	bin := egressdBinary(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "manifest.json"), weatherManifest("1.0.0", `"self.weather.example"`), 0o600)
	args, _ := json.Marshal([]string{"serve", "--manifest", dir, "--listen", "127.0.0.1:0", "--state", filepath.Join(dir, "state"),
		"--resolver", "127.0.0.1:9", "--audit-log", filepath.Join(dir, "audit.log")})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), execWithoutNetlinkEnv+"="+bin, execArgsEnv+"="+string(args))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if cmd.ProcessState.ExitCode() == 0 || cmd.ProcessState.ExitCode() == 99 {
			t.Fatalf("exit %v: %s", err, stderr.String())
		}
	case <-time.After(30 * time.Second): // a failsafe: it served instead of refusing
		cmd.Process.Kill()
		<-done
		t.Fatalf("egressd served without knowing the host's addresses:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "host's own addresses") || !strings.Contains(stderr.String(), "AF_NETLINK") {
		t.Fatalf("the refusal does not say why:\n%s", stderr.String())
	}
	t.Logf("%s", strings.TrimSpace(stderr.String()))
}

// netns is a network namespace the test creates and removes.
type netns struct{ name string }

func newNetns(t *testing.T) *netns {
	if _, err := exec.LookPath("ip"); err != nil || os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("network namespaces (root, iproute2) are required in CI")
		}
		t.Skip("needs root and iproute2")
	}
	n := &netns{name: fmt.Sprintf("egressd-t%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)}
	if out, err := exec.Command("ip", "netns", "add", n.name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", n.name).Run() })
	n.ip(t, "link", "set", "lo", "up")
	return n
}

// ip runs "ip -n NS args...".
func (n *netns) ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", append([]string{"-n", n.name}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v %s", args, err, out)
	}
}

// do runs f on a thread inside the namespace: sockets f creates live there.
func (n *netns) do(t *testing.T, f func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + n.name)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread() // a thread that could not go back dies with its goroutine
		}
	}()
	f()
}

// TestServeDeniesAnAddressAddedToTheHostWhileServing: the host's addresses
// were read once, at start; one added later (DHCP, a temporary IPv6
// address) was never denied, even after SIGHUP. egressd runs in a network
// namespace the test creates; an address is added to an interface
// there while it serves; a name resolving to it is then private_address.
func TestServeDeniesAnAddressAddedToTheHostWhileServing(t *testing.T) {
	n := newNetns(t)
	n.ip(t, "link", "add", "d0", "type", "veth", "peer", "name", "d1") // a dummy interface, where the module exists
	n.ip(t, "link", "set", "d0", "up")
	n.ip(t, "link", "set", "d1", "up")
	var dns *proxytest.DNS
	n.do(t, func() { dns = proxytest.StartDNS(t) })
	const self = "203.0.114.5" // exists only inside the test's namespace
	dns.Add(t, "self.weather.example. 60 IN A "+self, "self6.weather.example. 60 IN AAAA 2001:db8:5::5")

	connectTo, audit := serveIn(t, n, dns, `"self.weather.example","self6.weather.example"`)
	connect := func(host string) string { return connectTo(host + ":443") }
	if r := connect("self.weather.example"); r != "dial_error" {
		t.Fatalf("before the address exists: %s (want dial_error: allowed, nothing there)", r)
	}
	n.ip(t, "addr", "add", self+"/32", "dev", "d0")
	n.ip(t, "addr", "add", "2001:db8:5::5/128", "dev", "d0", "nodad")
	waitFor(t, audit, `"action":"host_addresses","msg":"[^"]*`+self+`[^"]*2001:db8:5::5`)
	if r := connect("self.weather.example"); r != "private_address" {
		t.Fatalf("a name resolving to an address added while serving: %s", r)
	}
	if r := connect("self6.weather.example"); r != "private_address" {
		t.Fatalf("a name resolving to an IPv6 address added while serving: %s", r)
	}
}

// serveIn starts egressd serve inside n for a manifest allowing hosts,
// resolved by dns, and returns a function that sends CONNECT host:port
// from inside n and returns the reason header, and the audit log.
func serveIn(t *testing.T, n *netns, dns *proxytest.DNS, hosts string) (connect func(hostport string) string, audit *lockedFile) {
	bin := egressdBinary(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "manifest.json"), weatherManifest("1.0.0", hosts), 0o600)
	auditFile := filepath.Join(dir, "audit.log")
	cmd := exec.Command("ip", "netns", "exec", n.name, bin, "serve", "--manifest", dir, "--listen", "127.0.0.1:0",
		"--state", filepath.Join(dir, "state"), "--resolver", dns.Addr, "--audit-log", auditFile)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	listen := waitFor(t, &stderr, `serving com.test.weather on (127\.0\.0\.1:\d+)`)[1]
	return func(hostport string) string {
		var c net.Conn
		n.do(t, func() {
			var err error
			if c, err = net.Dial("tcp", listen); err != nil {
				t.Fatal(err)
			}
		})
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		io.WriteString(c, "CONNECT "+hostport+" HTTP/1.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Get("X-Egress-Reason")
	}, &lockedFile{path: auditFile}
}

// TestServeDeniesAnAddressTheKernelRoutesToTheHostItself: the host's own
// addresses were its interface addresses only. An address the kernel's
// local routing table delivers to the host (ip route add local PREFIX dev
// lo: AnyIP, a TPROXY setup) is on no interface, so a name resolving to it
// was allowed and reached a service on the host, the IPv6 connection
// leaving from ::1 (IPv4 leaves from the address itself, which the check
// after the dial already caught). In a network namespace the test creates,
// both families get a local route and a service listens on every address;
// names resolving into those routes are private_address, with the reason.
func TestServeDeniesAnAddressTheKernelRoutesToTheHostItself(t *testing.T) {
	n := newNetns(t)
	n.ip(t, "route", "add", "local", "203.0.114.0/24", "dev", "lo") // exists only inside the test's namespace
	n.ip(t, "-6", "route", "add", "local", "2a0f:ffff:17::/64", "dev", "lo")
	var dns *proxytest.DNS
	var svc net.Listener
	n.do(t, func() {
		dns = proxytest.StartDNS(t)
		var err error
		if svc, err = net.Listen("tcp", "[::]:443"); err != nil { // a service on the host, every address
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { svc.Close() })
	go func() {
		for {
			c, err := svc.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dns.Add(t, "local4.weather.example. 60 IN A 203.0.114.9", "local6.weather.example. 60 IN AAAA 2a0f:ffff:17::9")
	connect, audit := serveIn(t, n, dns, `"local4.weather.example","local6.weather.example"`)
	for _, host := range []string{"local4.weather.example", "local6.weather.example"} {
		if r := connect(host + ":443"); r != "private_address" {
			t.Fatalf("%s, routed to the host by a local route: %s", host, r)
		}
	}
	waitFor(t, audit, `"host":"local6.weather.example"[^\n]*"rule":"[^"]*this host`)
}
