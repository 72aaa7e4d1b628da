package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// cgroupControllers are the v1 hierarchies a root sandbox gets a group in.
var cgroupControllers = []string{"pids", "memory", "cpu"}

// ownCgroupDir is this test process's group in the v1 hierarchy of
// controller (egressd, its child, makes the sandbox's group under it).
func ownCgroupDir(controller string) (string, bool) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && contains(strings.Split(parts[1], ","), controller) {
			dir := filepath.Join("/sys/fs/cgroup", controller, parts[2])
			if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
				return dir, true
			}
		}
	}
	return "", false
}

// requireCgroup skips unless egressd, as root, can make a sandbox's group
// in the v1 pids, memory and cpu hierarchies. Under CI a root runner on a
// host that has them must run these tests.
func requireCgroup(t *testing.T) {
	requireSandbox(t)
	have := true
	for _, c := range cgroupControllers {
		_, ok := ownCgroupDir(c)
		have = have && ok
	}
	switch {
	case have && os.Geteuid() == 0:
		return
	case have && os.Getenv("CI") == "true":
		t.Fatal("this host has the cgroup v1 pids, memory and cpu hierarchies: run the cgroup tests as root in CI")
	}
	t.Skip("needs root and the cgroup v1 pids, memory and cpu hierarchies")
}

// sandboxGroups are the sandbox's group directories that the egressd of
// pid made, one per hierarchy, by controller.
func sandboxGroups(t *testing.T, pid int) map[string]string {
	t.Helper()
	groups := map[string]string{}
	for _, c := range cgroupControllers {
		own, _ := ownCgroupDir(c)
		found, _ := filepath.Glob(filepath.Join(own, "egressd-com.test.sandboxed@*-"+strconv.Itoa(pid)))
		if len(found) == 1 {
			groups[c] = found[0]
		}
	}
	return groups
}

func readCgroupFile(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// pausedRun starts egressd run with script, which prints "ready" and then
// waits on stdin; it returns once "ready" is read, with the lines printed
// before it. go lets the script go on and returns the rest of its output
// and egressd's exit status.
func (e *sandboxEnv) pausedRun(cmd *exec.Cmd) (before []string, proceed func() (string, int)) {
	e.t.Helper()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	finished := false
	e.t.Cleanup(func() {
		if !finished {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			stdin.Close()
			cmd.Wait()
			e.t.Fatalf("the script ended before it was ready: %v\nstdout: %q\nstderr:\n%s", err, before, errb.String())
		}
		if line == "ready\n" {
			break
		}
		before = append(before, strings.TrimSuffix(line, "\n"))
	}
	return before, func() (string, int) {
		io.WriteString(stdin, "go\n")
		stdin.Close()
		rest, _ := io.ReadAll(r)
		err := cmd.Wait()
		finished = true
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return string(rest) + errb.String(), code
	}
}

// requireGroupsGone fails if the egressd of pid left a group behind.
func requireGroupsGone(t *testing.T, pid int) {
	t.Helper()
	if left := sandboxGroups(t, pid); len(left) != 0 {
		t.Fatalf("the sandbox's groups outlived the run: %v", left)
	}
}

// TestRunCPUSpinnerIsInAGroupWithTheCPUQuota: 100 processes that each
// called setsid() (an autogroup each) starved the host, since nothing
// bounded the sandbox's CPU time. Now setsid is refused (see
// TestRunSetsidCannotEscapeTheSandboxsCPUShare) and, as root, the whole
// sandbox, the spinner included, is in a group with a CFS quota, and its other bounds, which the
// host reads while it runs; the audit log names them; the groups go with
// the run.
func TestRunCPUSpinnerIsInAGroupWithTheCPUQuota(t *testing.T) {
	requireCgroup(t)
	e := newSandboxEnv(t)
	cmd := e.configured("sandbox_limits:\n  processes: 48\n  total_memory_mb: 256\n  cpus: 0.5\n",
		`sh -c 'while :; do :; done' & cat /proc/$!/cgroup; ls /sys/fs/cgroup 2>&1 >/dev/null | grep -q 'No such' || echo cgroupfs visible; echo ready; read x; kill $!`)
	inside, proceed := e.pausedRun(cmd)
	groups := sandboxGroups(t, cmd.Process.Pid)
	if len(groups) != len(cgroupControllers) {
		t.Fatalf("want a group in each of %v, found %v", cgroupControllers, groups)
	}
	for c, want := range map[string]map[string]string{
		"pids":   {"pids.max": "48"},
		"memory": {"memory.limit_in_bytes": strconv.Itoa(192 << 20), "memory.memsw.limit_in_bytes": strconv.Itoa(192 << 20), "memory.kmem.tcp.limit_in_bytes": strconv.Itoa(64 << 20)},
		"cpu":    {"cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000"},
	} {
		for file, value := range want {
			if _, err := os.Stat(filepath.Join(groups[c], file)); err != nil && strings.Contains(file, ".memsw.") {
				continue // no swap accounting on this kernel
			}
			if got := readCgroupFile(t, groups[c], file); got != value {
				t.Errorf("%s: %s, want %s", file, got, value)
			}
		}
		// Every task of the sandbox (init, shell, spinner) is in it, and
		// /proc/PID/cgroup of each says so from the host.
		procs := strings.Fields(readCgroupFile(t, groups[c], "cgroup.procs"))
		if len(procs) < 3 {
			t.Errorf("%s group holds %v, want the init, the shell and the spinner", c, procs)
		}
		for _, pid := range procs {
			data, _ := os.ReadFile("/proc/" + pid + "/cgroup")
			if !strings.Contains(string(data), "/"+filepath.Base(groups[c])+"\n") {
				t.Errorf("task %s is not in %s:\n%s", pid, groups[c], data)
			}
		}
	}
	if strings.Contains(strings.Join(inside, "\n"), "cgroupfs visible") {
		t.Error("the program sees a cgroupfs it could move itself out through")
	}
	// Inside, the sandbox's cgroup namespace is rooted at its group: the
	// spinner's cpu group reads "/", and the host's name for it (with
	// egressd's host pid) does not show (TestRunChildSeesNoHostCgroupPaths).
	if !strings.Contains(strings.Join(inside, "\n"), ":cpu:/\n") || strings.Contains(strings.Join(inside, "\n"), filepath.Base(groups["cpu"])) {
		t.Errorf("the spinner's /proc/PID/cgroup inside is not its namespace's root \"/\" for cpu:\n%s", strings.Join(inside, "\n"))
	}
	out, code := proceed()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	requireGroupsGone(t, cmd.Process.Pid)
	if want := `"msg":"cgroup v1: tasks 48, memory 256 MB for the whole sandbox: 192 MB for its processes and kernel memory, 64 MB for socket buffers (no swap), CPU 0.50 (quota 50000us per 100000us)"`; !strings.Contains(e.auditLog(), want) {
		t.Fatalf("want %s in the audit log:\n%s", want, e.auditLog())
	}
}

// TestRunForkBombStaysUnderTheGroupsPidsMax: the fork bomb fails inside,
// the group's task count never passes pids.max, and the host still forks.
// (RLIMIT_NPROC is set to the same bound and usually refuses first; the
// group holds whatever a uid-based count would miss.)
func TestRunForkBombStaysUnderTheGroupsPidsMax(t *testing.T) {
	requireCgroup(t)
	e := newSandboxEnv(t)
	cmd := e.configured("sandbox_limits:\n  processes: 48\n",
		`sh -c 'i=0; while [ $i -lt 400 ]; do sleep 1000 & i=$((i+1)); done' 2>&1; echo ready; read x`)
	bomb, proceed := e.pausedRun(cmd)
	groups := sandboxGroups(t, cmd.Process.Pid)
	pids := groups["pids"]
	if pids == "" {
		t.Fatalf("no pids group: %v", groups)
	}
	max, current := readCgroupFile(t, pids, "pids.max"), readCgroupFile(t, pids, "pids.current")
	if n, _ := strconv.Atoi(current); max != "48" || n < 40 || n > 48 {
		t.Fatalf("pids.max %s, pids.current %s: want the bomb held at 48", max, current)
	}
	if err := exec.Command("true").Run(); err != nil {
		t.Fatalf("the host cannot fork while the sandbox is full: %v", err)
	}
	if out, code := proceed(); code != 0 || !strings.Contains(strings.ToLower(strings.Join(bomb, "\n")), "fork") {
		t.Fatalf("exit %d, want the bomb's fork failure in:\n%s\n%s", code, strings.Join(bomb, "\n"), out)
	}
	requireGroupsGone(t, cmd.Process.Pid)
}

// TestRunMappedFilesStopAtTheSandboxsMemoryBound: open+mmap+close keeps
// each struct file alive past RLIMIT_NOFILE; 4 processes held 240,000 of
// them (about 100 MB of kernel slab) against the host's fs.file-max. The
// group's memory bound charges that kernel memory: 6 processes that each
// try to hold 60,000 are stopped (killed by the group's OOM killer, or
// refused) long before, and the group records hitting its limit.
func TestRunMappedFilesStopAtTheSandboxsMemoryBound(t *testing.T) {
	requireCgroup(t)
	e := newSandboxEnv(t)
	data, err := os.ReadFile(probeBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "probe"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	const procs, each = 6, 60000
	cmd := e.configured("sandbox_limits:\n  total_memory_mb: 48\n", fmt.Sprintf(
		`for i in $(seq %d); do (./probe mapfiles /etc/hostname %d; echo rc=$?) & done; wait; echo ready; read x`, procs, each))
	done, proceed := e.pausedRun(cmd)
	mem := sandboxGroups(t, cmd.Process.Pid)["memory"]
	if mem == "" {
		t.Fatal("no memory group")
	}
	// The OOM killer of the group, not of the host, stopped them.
	oom := readCgroupFile(t, mem, "memory.oom_control")
	out, code := proceed()
	full, stopped := 0, 0
	for _, line := range done {
		switch {
		case line == fmt.Sprintf("mapfiles held %d stop=<nil>", each):
			full++
		case line == "rc=137" || strings.HasPrefix(line, "mapfiles held") && strings.Contains(line, "cannot allocate memory"):
			stopped++
		}
	}
	if code != 0 || !strings.Contains(oom, "\noom_kill ") || strings.Contains(oom, "\noom_kill 0") || stopped < procs/2 || full > procs/2 {
		t.Fatalf("exit %d, memory.oom_control %q: %d of %d held all %d files, %d were stopped:\n%s\n%s",
			code, oom, full, procs, each, stopped, strings.Join(done, "\n"), out)
	}
	requireGroupsGone(t, cmd.Process.Pid)
}

// TestRunRemovesTheStaleGroupsOfADeadEgressd: an egressd killed before it
// could remove its groups leaves them; the next run removes the empty
// ones whose egressd is gone.
func TestRunRemovesTheStaleGroupsOfADeadEgressd(t *testing.T) {
	requireCgroup(t)
	e := newSandboxEnv(t)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	own, _ := ownCgroupDir("pids")
	var ns syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/pid", &ns); err != nil {
		t.Fatal(err)
	}
	// egressd-KEY-N-nsINODE-PID: a group of this PID namespace (egressd
	// judges no other) whose supervisor is gone.
	stale := filepath.Join(own, fmt.Sprintf("egressd-com.test.stale-1-ns%d-%d", ns.Ino, gone.Process.Pid))
	if err := os.Mkdir(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(stale) })
	if out, errs, code := e.run(`true`); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale group %s is still there (%v)", stale, err)
	}
}

// TestRunAsAUserSaysTheCgroupBoundsAreAbsent: a normal user's egressd can
// make no group; it runs with the rlimits alone, and the audit log says so
// rather than let the operator believe the sandbox's CPU and memory are
// bounded.
func TestRunAsAUserSaysTheCgroupBoundsAreAbsent(t *testing.T) {
	requireSandbox(t)
	uid := testUser(t)
	w := t.TempDir()
	os.Chmod(filepath.Dir(w), 0o755)
	dir, state := filepath.Join(w, "int"), filepath.Join(w, "state")
	os.MkdirAll(dir, 0o755)
	os.MkdirAll(state, 0o755)
	manifest := `{"schemaVersion":1,"id":"com.test.user","version":"1.0.0","runtime":{"kind":"local-mcp","command":"sh","args":["-c","true"]},
	"permissions":[{"kind":"network","domains":["api.allowed.example"]}]}`
	if err := os.WriteFile(filepath.Join(dir, "voiceos.integration.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(egressdBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(w, "egressd")
	os.WriteFile(bin, data, 0o755)
	filepath.Walk(w, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, uid) })
	auditLog := filepath.Join(state, "audit.log")
	cmd := exec.Command("setpriv", "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(uid), "--clear-groups", "--",
		bin, "run", "--state", state, "--audit-log", auditLog, "--resolver", "127.0.0.1:9", dir, "--", "/bin/sh", "-c", "echo ran")
	cmd.Env = append(os.Environ(), "HOME=/nonexistent")
	out, errs, code := runCmd(t, cmd)
	log, _ := os.ReadFile(auditLog)
	if code != 0 || out != "ran\n" || !strings.Contains(string(log), `"msg":"cgroup bounds absent (egressd is not root): only the rlimits hold"`) {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s\naudit log:\n%s", code, out, errs, log)
	}
}

// TestRunRefusesToStartWhenACgroupBoundCannotBeSet: a group can be had but
// the kernel refuses a bound (v1 takes no CPU quota above the parent
// group's), so the program never runs, egressd says why in one line, and
// the half-made group is removed.
func TestRunRefusesToStartWhenACgroupBoundCannotBeSet(t *testing.T) {
	requireCgroup(t)
	e := newSandboxEnv(t)
	own, _ := ownCgroupDir("cpu")
	parent, err := os.MkdirTemp(own, "egressd-test-parent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(parent) })
	if err := os.WriteFile(filepath.Join(parent, "cpu.cfs_quota_us"), []byte("50000"), 0); err != nil {
		t.Fatal(err)
	}
	cmd := e.configured("sandbox_limits:\n  cpus: 2\n", `echo the program ran`)
	// egressd starts inside the parent group: its shell moves itself there
	// and then becomes egressd.
	cmd.Args = append([]string{"sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, parent}, cmd.Args...)
	cmd.Path = "/bin/sh"
	out, errs, code := runCmd(t, cmd)
	want := "egressd run: sandbox: cgroup v1: cannot set cpu.cfs_quota_us=200000: "
	oneLine := false // the refusal is one line (a checkpoint may follow it)
	for _, line := range strings.Split(errs, "\n") {
		oneLine = oneLine || strings.HasPrefix(line, want) && strings.HasSuffix(line, "invalid argument")
	}
	if code == 0 || out != "" || !oneLine {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s\nwant %q", code, out, errs, want)
	}
	if left, _ := filepath.Glob(filepath.Join(parent, "egressd-*")); len(left) != 0 {
		t.Fatalf("the half-made group is still there: %v", left)
	}
	requireGroupsGone(t, cmd.Process.Pid)
}

// TestRunUnreadConnectionsStopAtTheSandboxsMemoryBound: unread loopback
// connections held about 85 pages of the host's TCP memory each, bounded
// only by open files times processes. The group charges socket buffers to
// the sandbox's memory bound: 400 connections that queue 124 MiB with a
// bound of 1024 MB queue 45 MiB with one of 32 MB. The kernel still lets
// each socket its minimum past the bound (tcp_rmem[0], tcp_wmem[0] and an
// skb: about 32 KiB a connection here), which the threat model counts.
// Since the sandbox's TCP connection bound (31 at 32 MB), the program's
// connects are refused before the 400th; what it queued stays bounded.
func TestRunUnreadConnectionsStopAtTheSandboxsMemoryBound(t *testing.T) {
	requireCgroup(t)
	e := newSandboxEnv(t)
	out, errs, code := runCmd(t, e.configured("sandbox_limits:\n  total_memory_mb: 32\n", `exec /usr/bin/python3 -c '
import fcntl, socket, struct, termios
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(512)
total, keep = 0, []
q = lambda s, op: struct.unpack("i", fcntl.ioctl(s, op, b"\0" * 4))[0]
for i in range(400):
    c = socket.socket()
    try: c.connect(srv.getsockname())
    except ConnectionRefusedError: break  # the TCP connection bound
    a, _ = srv.accept(); keep += [c, a]; c.setblocking(False)
    try:
        while True: c.send(b"x" * 65536)
    except BlockingIOError: pass
    total += q(c, termios.TIOCOUTQ) + q(a, termios.FIONREAD)
print("queued %d MiB" % (total >> 20))
'`))
	var mib int
	if _, err := fmt.Sscanf(out, "queued %d MiB", &mib); err != nil || code != 0 || mib > 32+400*32/1024 {
		t.Fatalf("exit %d, stdout %q (want at most 32 MiB and 32 KiB a connection queued), stderr %s", code, out, errs)
	}
}

// TestRunSharedAnonymousMemoryStopsAtTheSandboxsMemoryBound: RLIMIT_DATA
// does not count MAP_SHARED anonymous memory, so a 512 MB shared mapping
// was allocated and touched under memory_mb: 128. The group charges its
// pages: touching 256 MB under a 64 MB bound gets the process killed, and
// the sandbox's init, spared, reports it.
func TestRunSharedAnonymousMemoryStopsAtTheSandboxsMemoryBound(t *testing.T) {
	requireCgroup(t)
	e := newSandboxEnv(t)
	out, errs, code := runCmd(t, e.configured("sandbox_limits:\n  total_memory_mb: 64\n",
		`/usr/bin/python3 -c '
import mmap
m = mmap.mmap(-1, 256 << 20)
for i in range(0, 256 << 20, 4096): m[i] = 1
print("touched 256 MB")
'; echo rc=$?`))
	if code != 0 || out != "rc=137\n" {
		t.Fatalf("exit %d, stdout %q (want the python killed), stderr %s", code, out, errs)
	}
}

// TestCheckConfigWarnsWhenTheSandboxMemoryBoundCouldFillFileMax: the
// memory bound is what bounds the struct files a sandbox pins through
// mappings (about 512 bytes each); check says when it lets one sandbox
// reach the host's fs.file-max.
func TestCheckConfigWarnsWhenTheSandboxMemoryBoundCouldFillFileMax(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/fs/file-max")
	if err != nil {
		t.Skip("no /proc/sys/fs/file-max")
	}
	fileMax, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if fileMax > 1<<40 {
		t.Skip("fs.file-max is effectively unlimited here")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "egressd.yaml")
	huge := fileMax*512>>20 + 1024
	os.WriteFile(cfg, []byte(fmt.Sprintf("sandbox_limits:\n  total_memory_mb: %d\n", huge)), 0o600)
	out, _, code := runCLI(t, "check", "--config", cfg)
	if want := fmt.Sprintf("warning: sandbox_limits.total_memory_mb %d lets one sandbox keep about", huge); !strings.Contains(out, want) {
		t.Fatalf("exit %d, want %q in:\n%s", code, want, out)
	}
	os.WriteFile(cfg, []byte("sandbox_limits:\n  total_memory_mb: 64\n"), 0o600)
	if out, _, _ := runCLI(t, "check", "--config", cfg); strings.Contains(out, "total_memory_mb") {
		t.Fatalf("warned about 64 MB: %s", out)
	}
}
