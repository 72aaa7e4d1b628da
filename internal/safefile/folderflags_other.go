//go:build !linux

package safefile

import "golang.org/x/sys/unix"

// parentFlags opens a folder only to work relative to it.
const parentFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
