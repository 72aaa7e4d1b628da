package selftest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
)

// killableChecks are the probes the seccomp filter answers by killing the
// whole process (SIGSYS) rather than with an error: a foreign ABI. Each
// runs in a child of its own, so the battery survives it.
var killableChecks = map[string]func() (verdict, detail string){
	"foreign-abi": foreignABI,
	"x32-abi":     x32ABI,
}

// runKillableChild is the child's side: egressd ProbeArg killable NAME. It
// prints "verdict<TAB>detail" and exits 0, unless the kernel kills it.
func runKillableChild(name string) int {
	check, ok := killableChecks[name]
	if !ok {
		return 2
	}
	v, d := check()
	fmt.Print(v + "\t" + d)
	return 0
}

// killable runs the named check in a child process and judges what became
// of it: killed by SIGSYS is the filter's answer, and closed.
func killable(name string) check {
	return func(ctx context.Context, _ *Config) (string, string) {
		out, err := exec.CommandContext(ctx, "/proc/self/exe", ProbeArg, "killable", name).Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGSYS {
				return closed("the seccomp filter killed the process that tried it (SIGSYS)")
			}
			return skipped("the probe's process ended otherwise (%s): this host gives no answer", ee.ProcessState)
		}
		if err != nil {
			return skipped("cannot start the probe's process: %v", err)
		}
		v, d, ok := strings.Cut(string(out), "\t")
		if !ok || (v != Closed && v != Open && v != Skipped) {
			return opened("the probe's process printed no verdict (%q): nothing can be said to be closed", out)
		}
		return v, d
	}
}
