package main

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunProgramCannotLimitItsInit is the attacker's repro-prlimit-init.sh:
// the sandbox's init shares the program's uid, and prlimit64 on pid 1 set
// its CPU limit to one second; the init, busy forwarding the program's
// signals, was killed by the kernel and the run ended with 137 instead of
// the program's status. prlimit64 on another process is refused; on the
// program itself (pid 0, as glibc and Go call it) it works.
func TestRunProgramCannotLimitItsInit(t *testing.T) {
	e := newSandboxEnv(t)
	script := fmt.Sprintf(`exec perl -e '
my $rl = pack("QQ", 1, 1);
syscall(%[1]d, 1, 0, $rl, 0) == -1 ? print "init: $!\n" : print "init: limited\n";
my $old = pack("QQ", 0, 0);
syscall(%[1]d, 0, 7, 0, $old) == -1 ? print "self: $!\n" : print "self: ok\n";
exit 7;
'`, unix.SYS_PRLIMIT64)
	out, errs, code := e.run(script)
	if !strings.Contains(out, "init: Operation not permitted\n") || !strings.Contains(out, "self: ok\n") || code != 7 {
		t.Fatalf("exit %d, want the program's 7\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}
