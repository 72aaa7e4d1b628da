package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/egressd/egressd/proxy/proxytest"
)

var (
	releaseOnce sync.Once
	releaseBin  string
	releaseErr  error
)

// egressdBinary builds the egressd binary once for the run tests: the
// sandbox re-executes the binary it runs from as its init, so the test
// binary itself cannot stand in.
func egressdBinary(t testing.TB) string {
	releaseOnce.Do(func() {
		dir, err := os.MkdirTemp("", binDirPrefix())
		if err != nil {
			releaseErr = err
			return
		}
		releaseBin = filepath.Join(dir, "egressd")
		build := exec.Command("go", "build", "-trimpath", "-o", releaseBin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0") // static, as make build and make release build it
		out, err := build.CombinedOutput()
		if err != nil {
			releaseErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if releaseErr != nil {
		t.Fatal(releaseErr)
	}
	return releaseBin
}

// requireSandbox skips where namespaces cannot be made, except in CI, where
// a skip would hide a broken feature.
func requireSandbox(t *testing.T) {
	if _, err := os.Stat("/proc/self/ns/user"); err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("user namespaces are required in CI")
	}
	t.Skip("no user namespaces here")
}

// sandboxEnv is one integration folder, a TLS origin on 127.0.0.2 and a DNS
// server that resolves its names, for egressd run.
type sandboxEnv struct {
	t      *testing.T
	dir    string // the integration folder
	state  string
	audit  string
	ca     *proxytest.CA
	origin *proxytest.Origin
	dns    *proxytest.DNS
	port   string
}

func newSandboxEnv(t *testing.T) *sandboxEnv {
	requireSandbox(t)
	e := &sandboxEnv{t: t, dir: t.TempDir(), state: t.TempDir(), ca: proxytest.NewCA(t), dns: proxytest.StartDNS(t)}
	os.Chmod(e.dir, 0o755)
	e.audit = filepath.Join(e.state, "audit.log")
	e.origin = proxytest.StartOrigin(t, e.ca, "127.0.0.2", "api.allowed.example", "evil.example")
	e.port = strconv.Itoa(int(e.origin.Addr.Port()))
	for _, n := range []string{"api.allowed.example", "evil.example"} {
		e.dns.Add(t, n+". 60 IN A 127.0.0.2")
	}
	os.WriteFile(filepath.Join(e.dir, "ca.pem"), e.ca.PEM(), 0o644)
	os.WriteFile(filepath.Join(e.dir, "voiceos.integration.json"), []byte(`{"schemaVersion":1,"id":"com.test.sandboxed","version":"1.0.0",
	"runtime":{"kind":"local-mcp","command":"sh","args":["-c","echo runtime ran"]},
	"auth":{"kind":"apiKey","fields":[{"key":"DECLARED_SECRET","label":"k"}]},
	"permissions":[{"kind":"network","domains":["api.allowed.example"]}]}`), 0o644)
	return e
}

// run runs egressd run with a shell script as the command and returns its
// stdout, stderr and exit status.
func (e *sandboxEnv) run(script string, extraEnv ...string) (string, string, int) {
	cmd := e.command(script)
	cmd.Env = append(cmd.Env, extraEnv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func (e *sandboxEnv) command(script string) *exec.Cmd {
	cmd := exec.Command(egressdBinary(e.t), "run", "--state", e.state, "--audit-log", e.audit,
		"--resolver", e.dns.Addr, "--allow-private", "127.0.0.2/32", "--allow-port", e.port, e.dir, "--", "/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), "AWS_SECRET_ACCESS_KEY=launcher-secret", "DECLARED_SECRET=declared-value")
	return cmd
}

func (e *sandboxEnv) auditLog() string {
	data, _ := os.ReadFile(e.audit)
	return string(data)
}

func (e *sandboxEnv) url(host string) string { return "https://" + host + ":" + e.port + "/" }

func TestRunCurlThroughTheProxyEnv(t *testing.T) {
	e := newSandboxEnv(t)
	out, errs, code := e.run(`curl -sS -m 10 --cacert ca.pem ` + e.url("api.allowed.example") + `; echo; curl -sS -m 10 --cacert ca.pem ` + e.url("evil.example") + ` 2>&1; echo rc=$?`)
	if code != 0 || !strings.Contains(out, "hello from api.allowed.example") || !strings.Contains(out, "rc=56") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	log := e.auditLog()
	if !strings.Contains(log, `"decision":"allow","reason":"allowed","host":"api.allowed.example"`) || !strings.Contains(log, `"decision":"deny","reason":"not_allowlisted","host":"evil.example"`) {
		t.Fatalf("audit log:\n%s", log)
	}
}

func TestRunProgramThatIgnoresProxyEnvIsCaptured(t *testing.T) {
	e := newSandboxEnv(t)
	out, errs, code := e.run(`curl -sS -m 10 --noproxy '*' --cacert ca.pem ` + e.url("api.allowed.example") + `; echo; curl -sS -m 10 --noproxy '*' --cacert ca.pem ` + e.url("evil.example") + ` 2>&1; echo rc=$?`)
	if code != 0 || !strings.Contains(out, "hello from api.allowed.example") || !strings.Contains(out, "rc=6") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	log := e.auditLog()
	if !strings.Contains(log, `"method":"captured"`) || !strings.Contains(log, `"event":"dns","integration":"com.test.sandboxed","integration_version":"1.0.0","generation":1,"decision":"deny","reason":"not_allowlisted","host":"evil.example"`) {
		t.Fatalf("audit log:\n%s", log)
	}
	if e.dns.Questions("evil.example") != 0 {
		t.Fatal("the sandbox DNS forwarded a denied name upstream")
	}
}

func TestRunNodeFetchIsEnforced(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is required in CI")
		}
		t.Skip("node not installed")
	}
	e := newSandboxEnv(t)
	script := `NODE_EXTRA_CA_CERTS=ca.pem ` + node + ` -e '
fetch("` + e.url("api.allowed.example") + `").then(r => r.text()).then(t => console.log("allowed:", t)).catch(e => console.log("allowed failed:", e.cause && e.cause.code))
  .then(() => fetch("` + e.url("evil.example") + `")).then(r => console.log("denied got", r.status)).catch(e => console.log("denied refused:", e.cause && e.cause.code))'`
	out, errs, code := e.run(script)
	if code != 0 || !strings.Contains(out, "allowed: hello from api.allowed.example") || !strings.Contains(out, "denied refused: ENOTFOUND") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}

func TestRunDirectConnectionsAllFail(t *testing.T) {
	e := newSandboxEnv(t)
	hostTCP, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostTCP.Close()
	hostUDP, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostUDP.Close()
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		n, _, _ := hostUDP.ReadFrom(buf)
		got <- string(buf[:n])
	}()
	script := strings.Join([]string{
		`curl -sS -m 5 --noproxy '*' --cacert ca.pem https://127.0.0.2:` + e.port + `/ 2>&1; echo ip_literal=$?`,
		`curl -sS -m 5 --noproxy '*' http://` + hostTCP.Addr().String() + `/ 2>&1; echo host_loopback=$?`,
		`curl -sS -m 5 --noproxy '*' --cacert ca.pem https://127.0.0.1:443/ 2>&1; echo own_loopback=$?`,
		`curl -sS -m 5 --noproxy '*' http://93.184.216.34/ 2>&1; echo public_ip=$?`,
		`echo leak > /dev/udp/127.0.0.1/` + strings.Split(hostUDP.LocalAddr().String(), ":")[1] + ` 2>&1; echo udp=$?`,
	}, "; ")
	out, errs, _ := e.run("exec bash -c '" + strings.ReplaceAll(script, "'", `'"'"'`) + "'")
	for _, want := range []string{"ip_literal=35", "host_loopback=7", "own_loopback=35", "public_ip=7"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %s in:\n%s\nstderr:\n%s", want, out, errs)
		}
	}
	select {
	case m := <-got:
		t.Fatalf("a UDP datagram reached the host: %q", m)
	default:
	}
	// Each refused address is its own finding: folding keeps distinct
	// targets, so both are in the log.
	log := e.auditLog()
	if !strings.Contains(log, `"reason":"ip_literal","host_raw":"127.0.0.2:`+e.port+`"`) || !strings.Contains(log, `"reason":"ip_literal","host_raw":"127.0.0.1:443"`) {
		t.Errorf("captured connections to stray addresses not audited:\n%s", log)
	}
}

func TestRunFilesystemAndEnvironmentAreFenced(t *testing.T) {
	e := newSandboxEnv(t)
	home, _ := os.UserHomeDir()
	bashrc := filepath.Join(home, ".bashrc")
	before, _ := os.ReadFile(bashrc)
	var sockets []string
	for _, d := range []string{os.TempDir(), "/run", "/var/tmp", home} {
		p := filepath.Join(d, fmt.Sprintf("egressd-test-%d.sock", os.Getpid()))
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		sockets = append(sockets, p)
	}
	script := strings.Join([]string{
		`echo pwned >> ~/.bashrc; echo bashrc=$?`,
		`echo x >> ` + filepath.Join(e.dir, "voiceos.integration.json") + ` 2>/dev/null; echo manifest=$?`,
		`echo x > ` + filepath.Join(e.dir, "new") + ` 2>/dev/null; echo folder=$?`,
		`cat ` + e.audit + ` >/dev/null 2>&1; echo auditlog=$?`,
		`echo ok > /var/lib/integration/state; echo state=$?`,
		`for s in ` + strings.Join(sockets, " ") + `; do test -e $s && echo visible=$s; done`,
		`echo AWS=${AWS_SECRET_ACCESS_KEY:-absent} DECLARED=${DECLARED_SECRET:-absent}`,
		`ls /run /var/log /sys /home 2>&1 | head -3`,
		`ls / >/dev/null 2>&1; echo landlock_root=$?`,
		`grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\t' ' '`,
		`unshare -U true 2>/dev/null; echo unshare=$?`,
		`perl -e 'my $p = "\0" x 120; syscall(425, 8, $p); print "io_uring_errno=", $!+0, "\n"'`,
		`kill -0 ` + strconv.Itoa(os.Getpid()) + ` 2>/dev/null; echo signal_outside=$?`,
	}, "; ")
	out, errs, code := e.run(script)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"auditlog=1", "state=0", "AWS=absent DECLARED=declared-value",
		"landlock_root=2", "CapEff: 0000000000000000", "CapBnd: 0000000000000000", "NoNewPrivs: 1", "Seccomp: 2", "unshare=1",
		"io_uring_errno=1", "signal_outside=1"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %s in:\n%s", want, out)
		}
	}
	for _, wrote := range []string{"manifest=0", "folder=0"} {
		if strings.Contains(out, wrote) {
			t.Errorf("the sandbox could write: %s", wrote)
		}
	}
	if strings.Contains(out, "visible=") {
		t.Errorf("a host unix socket is visible:\n%s", out)
	}
	if after, _ := os.ReadFile(bashrc); !bytes.Equal(before, after) {
		t.Error("the host's ~/.bashrc changed")
	}
}

func TestRunLeakedSocketDoesNotReachTheChild(t *testing.T) {
	e := newSandboxEnv(t)
	// A UDP socket egressd's launcher leaked, without close-on-exec.
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	leaked := os.NewFile(uintptr(fd), "leaked-udp")
	defer leaked.Close()
	cmd := e.command(`ls /proc/self/fd | tr '\n' ' '`)
	cmd.ExtraFiles = []*os.File{leaked} // fd 3 in egressd
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	// 0, 1, 2 and the fd ls itself opens for the listing.
	if fields := strings.Fields(string(out)); len(fields) != 4 {
		t.Fatalf("fds in the child: %s", out)
	}
}

func TestRunExitCodesAndSignals(t *testing.T) {
	e := newSandboxEnv(t)
	if _, _, code := e.run("exit 42"); code != 42 {
		t.Fatalf("exit code %d, want 42", code)
	}
	if _, _, code := e.run("kill -KILL $$"); code != 128+9 {
		t.Fatalf("killed target: exit %d, want 137", code)
	}
	// SIGTERM to egressd reaches the sh -c target, which traps it.
	cmd := e.command(`trap 'echo got TERM; exit 43' TERM; echo ready; while :; do sleep 0.1; done`)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("target did not start: %q %v", buf, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	rest := make([]byte, 64)
	n, _ := stdout.Read(rest)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 43 || !strings.Contains(string(rest[:n]), "got TERM") {
		t.Fatalf("SIGTERM: %v, output %q", err, rest[:n])
	}
}

func TestRunKillingEgressdKillsTheTree(t *testing.T) {
	e := newSandboxEnv(t)
	marker := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1000000) // a sleep no one else runs
	cmd := e.command(`sleep ` + marker + ` & sleep ` + marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForProcess(t, marker, true)
	cmd.Process.Kill() // SIGKILL: no chance to clean up
	cmd.Wait()
	waitForProcess(t, marker, false)
}

// waitForProcess waits until a "sleep NAME" process exists (or is gone),
// by scanning /proc. It is bounded in time.
func waitForProcess(t *testing.T, name string, present bool) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		found := false
		entries, _ := os.ReadDir("/proc")
		for _, en := range entries {
			if data, err := os.ReadFile(filepath.Join("/proc", en.Name(), "cmdline")); err == nil && string(data) == "sleep\x00"+name+"\x00" {
				found = true
				break
			}
		}
		if found == present {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("process %s present=%v never happened", name, present)
}

func TestRunUsesTheManifestRuntimeAndRefusesRemote(t *testing.T) {
	e := newSandboxEnv(t)
	cmd := exec.Command(egressdBinary(t), "run", "--state", e.state, "--audit-log", e.audit, "--resolver", e.dns.Addr, e.dir)
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "runtime ran" {
		t.Fatalf("runtime: %v %q", err, out)
	}
	remote := t.TempDir()
	os.WriteFile(filepath.Join(remote, "voiceos.integration.json"), []byte(`{"schemaVersion":1,"id":"com.test.remote","version":"1.0.0","runtime":{"kind":"remote-mcp","url":"https://x.example"}}`), 0o644)
	out, err = exec.Command(egressdBinary(t), "run", "--state", e.state, "--resolver", e.dns.Addr, remote).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "com.test.remote is a remote-mcp integration: nothing runs locally") {
		t.Fatalf("remote: %v %s", err, out)
	}
}

// TestRunRealMCPServer drives a stdio MCP server built on the official SDK
// (installed by ./scripts/test) through egressd run: it answers initialize and
// tools/list, its tool reaches the allowed host, and a denied one fails.
func TestRunRealMCPServer(t *testing.T) {
	fixture, _ := filepath.Abs("testdata/mcp-sdk")
	if _, err := os.Stat(filepath.Join(fixture, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the MCP SDK is not installed; ./scripts/test installs it (npm ci in cmd/egressd/testdata/mcp-sdk)")
		}
		t.Skip("the MCP SDK is not installed: run ./scripts/test-prerequisites, or npm ci in cmd/egressd/testdata/mcp-sdk")
	}
	e := newSandboxEnv(t)
	e.dir = fixture
	// The test CA goes into the integration's writable folder, which the
	// sandbox sees at /var/lib/integration.
	stateFolder := e.stateFolder("com.test.mcp-sdk")
	os.MkdirAll(stateFolder, 0o700)
	os.WriteFile(filepath.Join(stateFolder, "ca.pem"), e.ca.PEM(), 0o644)
	cmd := exec.Command(egressdBinary(t), "run", "--state", e.state, "--audit-log", e.audit, "--resolver", e.dns.Addr,
		"--allow-private", "127.0.0.2/32", "--allow-port", e.port, "--env", "NODE_EXTRA_CA_CERTS", fixture)
	cmd.Env = append(os.Environ(), "NODE_EXTRA_CA_CERTS=/var/lib/integration/ca.pem")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	call := func(id int, method, params string) string {
		fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":%d,"method":"%s","params":%s}`+"\n", id, method, params)
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s: server exited; stderr:\n%s", method, stderr.String())
			}
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no answer; stderr:\n%s", method, stderr.String())
		}
		return ""
	}
	if r := call(1, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"egressd-test","version":"1"}}`); !strings.Contains(r, `"serverInfo":{"name":"egressd-test"`) {
		t.Fatalf("initialize: %s", r)
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if r := call(2, "tools/list", `{}`); !strings.Contains(r, `"name":"fetch_url"`) {
		t.Fatalf("tools/list: %s", r)
	}
	if r := call(3, "tools/call", `{"name":"fetch_url","arguments":{"url":"`+e.url("api.allowed.example")+`"}}`); !strings.Contains(r, "hello from api.allowed.example") {
		t.Fatalf("allowed fetch: %s\nstderr:\n%s", r, stderr.String())
	}
	if r := call(4, "tools/call", `{"name":"fetch_url","arguments":{"url":"`+e.url("evil.example")+`"}}`); !strings.Contains(r, `"isError":true`) || !strings.Contains(r, "fetch failed: ENOTFOUND") {
		t.Fatalf("denied fetch: %s", r)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}
	if log := e.auditLog(); !strings.Contains(log, `"event":"dns","integration":"com.test.mcp-sdk"`) || !strings.Contains(log, `"decision":"allow","reason":"allowed","host":"api.allowed.example"`) {
		t.Fatalf("audit log:\n%s", log)
	}
}

// TestRunExampleIntegration runs configs/examples/coffee-tracker as a new
// user would: its dependency-free MCP server starts sandboxed, answers, and
// is refused a host outside its manifest.
func TestRunExampleIntegration(t *testing.T) {
	requireSandbox(t)
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is required in CI")
		}
		t.Skip("node not installed")
	}
	dns := proxytest.StartDNS(t)
	cmd := exec.Command(egressdBinary(t), "run", "--state", t.TempDir(), "--resolver", dns.Addr, "../../configs/examples/coffee-tracker")
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fetch_url","arguments":{"url":"https://evil.example/"}}}
`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s\n%s", err, out, stderr.String())
	}
	for _, want := range []string{`"serverInfo":{"name":"coffee-tracker"`, `"name":"coffee_stats"`, `"isError":true`, "could not be fetched (ENOTFOUND)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("missing %s in:\n%s", want, out)
		}
	}
}

// TestRunAsNonRootUser runs the sandbox as an ordinary user (made here
// with useradd, entered with setpriv): a single-id user namespace map, and
// the same enforcement.
func TestRunAsNonRootUser(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test creates a user: it needs root, as ./scripts/test says")
		}
		t.Skip("this test creates a user; it needs root (CI runs as root)")
	}
	for _, tool := range []string{"useradd", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is required", tool)
		}
	}
	const user = "egressd-test"
	if err := exec.Command("id", user).Run(); err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v %s", err, out)
		}
	}
	uidOut, _ := exec.Command("id", "-u", user).Output()
	uid, _ := strconv.Atoi(strings.TrimSpace(string(uidOut)))
	e := newSandboxEnv(t)
	// Everything the user runs from must be the user's, or world-readable.
	bin := filepath.Join(t.TempDir(), "egressd")
	data, _ := os.ReadFile(egressdBinary(t))
	os.WriteFile(bin, data, 0o755)
	os.Chmod(filepath.Dir(bin), 0o755)
	for _, d := range []string{e.dir, e.state} {
		os.Chmod(filepath.Dir(d), 0o755) // the test's temporary root
		filepath.Walk(d, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, uid, uid) })
	}
	cmd := exec.Command("setpriv", "--reuid="+user, "--regid="+user, "--clear-groups", "--",
		bin, "run", "--state", e.state, "--audit-log", e.audit, "--resolver", e.dns.Addr,
		"--allow-private", "127.0.0.2/32", "--allow-port", e.port, e.dir, "--",
		"/bin/sh", "-c", `id -u; curl -sS -m 10 --cacert ca.pem `+e.url("api.allowed.example")+`; echo; curl -sS -m 10 --noproxy '*' `+e.url("evil.example")+` 2>&1; echo rc=$?`)
	cmd.Env = append(os.Environ(), "HOME=/nonexistent")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v:\n%s\n%s", err, out, stderr.String())
	}
	if !strings.HasPrefix(string(out), "0\n") || !strings.Contains(string(out), "hello from api.allowed.example") || !strings.Contains(string(out), "rc=6") {
		t.Fatalf("non-root sandbox:\n%s", out)
	}
}

func TestRunConfigAppliesOperatorSettings(t *testing.T) {
	e := newSandboxEnv(t)
	cfg := filepath.Join(t.TempDir(), "egressd.yaml")
	os.WriteFile(cfg, []byte("env_passthrough: [OPERATOR_VAR]\ndeny:\n  hosts: [\"api.allowed.*\"]\n"), 0o600)
	cmd := exec.Command(egressdBinary(t), "run", "--config", cfg, "--state", e.state, "--audit-log", e.audit, "--resolver", e.dns.Addr,
		"--allow-private", "127.0.0.2/32", "--allow-port", e.port, e.dir, "--", "/bin/sh", "-c",
		`echo var=$OPERATOR_VAR; curl -sS -m 10 --cacert ca.pem `+e.url("api.allowed.example")+` 2>&1; echo rc=$?`)
	cmd.Env = append(os.Environ(), "OPERATOR_VAR=passed")
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "var=passed") || !strings.Contains(string(out), "rc=56") {
		t.Fatalf("%v:\n%s", err, out)
	}
	if !strings.Contains(e.auditLog(), `"reason":"operator_denied","host":"api.allowed.example"`) {
		t.Fatalf("audit log:\n%s", e.auditLog())
	}
}
