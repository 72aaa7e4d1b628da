package main

import (
	"os"
	"strings"
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
	out, errs, code := e.run(`readlink /proc/self/ns/cgroup; cat /proc/self/cgroup`)
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
