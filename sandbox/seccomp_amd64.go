//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// nativeArch is the only ABI the filter lets through.
const nativeArch = unix.AUDIT_ARCH_X86_64

// hasX32: amd64 kernels may also take x32 calls, numbered with bit 30.
const hasX32 = true

// archWatchCalls: amd64 also has the legacy inotify_init (see watchCalls).
var archWatchCalls = map[string]uint32{"inotify_init": unix.SYS_INOTIFY_INIT}
