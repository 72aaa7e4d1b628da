//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// nativeArch is the only ABI the filter lets through (no AArch32 calls).
const nativeArch = unix.AUDIT_ARCH_AARCH64

// hasX32: arm64 has no x32.
const hasX32 = false

// archWatchCalls: arm64 has only inotify_init1 (see watchCalls).
var archWatchCalls = map[string]uint32{}
