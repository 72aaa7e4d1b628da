package selftest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

func int80(trap, a1, a2, a3 uintptr) uintptr

// i386 system call numbers.
const (
	i386Getpid = 20
	i386Keyctl = 288
)

// foreignABIChild runs in its own process, since int 0x80 kills a process
// on a kernel without 32-bit emulation. It prints "nosys", or keyctl's
// result: a keyring id or -errno.
func foreignABIChild() int {
	if r := int(int32(int80(i386Getpid, 0, 0, 0))); r != os.Getpid() {
		fmt.Print("nosys")
		return 0
	}
	fmt.Print(int(int32(int80(i386Keyctl, 0, keySpecSession&0xffffffff, 0))))
	return 0
}

// probeForeignABI calls keyctl through int 0x80: a filter that does not
// check the architecture lets the i386 call through.
func probeForeignABI(ctx context.Context, _ *Config) (string, string) {
	out, err := exec.CommandContext(ctx, "/proc/self/exe", ProbeArg, "int80").Output()
	var ee *exec.ExitError
	switch s := strings.TrimSpace(string(out)); {
	case errors.As(err, &ee):
		return skipped("int 0x80 killed the process (%s): no 32-bit emulation here", ee.ProcessState)
	case err != nil:
		return skipped("cannot start the probe: %v", err)
	case s == "nosys":
		return skipped("this kernel has no 32-bit emulation")
	case s == "-1": // -EPERM
		return closed("i386 keyctl: EPERM")
	case strings.HasPrefix(s, "-"):
		return opened("i386 keyctl reached the kernel: errno %s", s[1:])
	default:
		return opened("i386 keyctl succeeded (keyring %s)", s)
	}
}
