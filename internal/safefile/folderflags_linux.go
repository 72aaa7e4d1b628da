package safefile

import "golang.org/x/sys/unix"

// parentFlags opens a folder only to work relative to it: O_PATH needs no
// read permission on it.
const parentFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC
