package selftest

import "golang.org/x/sys/unix"

// landlockABI asks the kernel: landlock_create_ruleset(NULL, 0,
// LANDLOCK_CREATE_RULESET_VERSION). 0 means no Landlock.
func landlockABI() int {
	if abi, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1); e == 0 {
		return int(abi)
	}
	return 0
}
