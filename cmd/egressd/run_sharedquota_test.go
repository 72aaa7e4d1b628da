package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// sharedQuotaWarning is the start of what run says when the sandbox runs
// as its launcher's own uid.
const sharedQuotaWarning = "egressd: warning: the sandbox runs as your uid"

// TestRunAsANormalUserSaysTheSandboxSharesItsKernelQuotas is issue 12's
// ninth attacker, finding 4: a normal user's sandbox runs as the
// launcher's own host uid, and the kernel counts epoll watches, descriptors
// in flight on unix sockets and pipe buffers per host uid: the program
// took the whole epoll quota (every Go program of that user then died at
// start) and the in-flight quota (ETOOMANYREFS for the user's processes).
// The README claimed those quotas were the sandbox's own. There is no
// bound of the sandbox's own for them without a uid of its own, so run
// says so, once, on stderr and in the audit log; as root, whose sandbox
// has a uid of its own, it says nothing.
func TestRunAsANormalUserSaysTheSandboxSharesItsKernelQuotas(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to run egressd as another user")
		}
		t.Skip("needs root to run egressd as another user")
	}
	e := newSandboxEnv(t)
	_, errs, code := e.run("true")
	if code != 0 || strings.Contains(errs, sharedQuotaWarning) {
		t.Errorf("as root: exit %d, stderr:\n%s", code, errs)
	}
	const uid, gid = 64993, 64993
	bin := e.binaryForUser(uid, gid)
	cmd := e.command("echo ran")
	cmd.Path, cmd.Args[0] = bin, bin
	cmd.Env = append(cmd.Env, "HOME="+e.state)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	out, errs, code := runCmd(t, cmd)
	if code != 0 || out != "ran\n" || strings.Count(errs, sharedQuotaWarning) != 1 {
		t.Fatalf("as a normal user: exit %d, stdout %q, stderr:\n%s", code, out, errs)
	}
	for _, quota := range []string{"epoll watches", "descriptors in flight", "pipe buffers"} {
		if !strings.Contains(errs, quota) {
			t.Errorf("the warning does not name %s:\n%s", quota, errs)
		}
	}
	if log := e.auditLog(); !strings.Contains(log, `"action":"shared_user_quotas"`) {
		t.Errorf("the audit log does not say it:\n%s", log)
	}
}
