package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestRunChildSeesNoHostCgroupPaths: the sandbox shared the host's cgroup
// namespace, so /proc/self/cgroup inside showed the host's cgroup paths,
// the launcher's group and, in the sandbox group's name, egressd's host
// pid. The target now starts in a cgroup namespace of its own, rooted at
// its group: every line must read "/" as the path, and the namespace must
// not be the test's (the launcher's).
func TestRunChildSeesNoHostCgroupPaths(t *testing.T) {
	e := newSandboxEnv(t)
	host, err := os.Readlink("/proc/self/ns/cgroup")
	if err != nil {
		t.Skipf("no cgroup namespace here: %v", err)
	}
	out, errs, code := e.run(cgroupScript)
	checkCgroupLines(t, host, out, errs, code)
}

const cgroupScript = `readlink /proc/self/ns/cgroup; cat /proc/self/cgroup`

// TestRunNormalUsersChildSeesNoLauncherCgroupPaths: as a normal user
// egressd makes no group, and the child saw its launcher's own cgroup
// paths (here the test's memory group). It must see "/" there too.
func TestRunNormalUsersChildSeesNoLauncherCgroupPaths(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to run egressd as another user")
		}
		t.Skip("needs root to run egressd as another user")
	}
	e := newSandboxEnv(t)
	host, err := os.Readlink("/proc/self/ns/cgroup")
	if err != nil {
		t.Skipf("no cgroup namespace here: %v", err)
	}
	const uid, gid = 64992, 64992
	bin := e.binaryForUser(uid, gid)
	cmd := e.command(cgroupScript)
	cmd.Path, cmd.Args[0] = bin, bin
	cmd.Env = append(cmd.Env, "HOME="+e.state)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	out, errs, code := runCmd(t, cmd)
	checkCgroupLines(t, host, out, errs, code)
}

// checkCgroupLines judges cgroupScript's output: a namespace other than
// the launcher's, and "/" as every path.
func checkCgroupLines(t *testing.T, host, out, errs string, code int) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 2 {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errs)
	}
	if lines[0] == host {
		t.Errorf("the sandbox is in the launcher's cgroup namespace %s", host)
	}
	for _, line := range lines[1:] {
		if parts := strings.SplitN(line, ":", 3); len(parts) != 3 || parts[2] != "/" {
			t.Errorf("/proc/self/cgroup inside shows a host path: %q", line)
		}
	}
}
