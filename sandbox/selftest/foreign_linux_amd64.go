package selftest

import "os"

func int80(trap, a1, a2, a3 uintptr) uintptr

// i386 system call numbers.
const (
	i386Getpid = 20
	i386Keyctl = 288
)

// foreignABI calls keyctl through int 0x80: a filter that does not check
// the architecture lets the i386 call through. It runs in a process of its
// own (killable), since the filter kills the whole process, and a kernel
// without 32-bit emulation kills it with SIGSEGV.
func foreignABI() (string, string) {
	if r := int(int32(int80(i386Getpid, 0, 0, 0))); r != os.Getpid() {
		return skipped("this kernel has no 32-bit emulation (i386 getpid: %d)", r)
	}
	switch r := int(int32(int80(i386Keyctl, 0, keySpecSession&0xffffffff, 0))); {
	case r == -1: // -EPERM
		return closed("i386 keyctl: EPERM")
	case r < 0:
		return opened("i386 keyctl reached the kernel: errno %d", -r)
	default:
		return opened("i386 keyctl succeeded (keyring %d)", r)
	}
}
