package sandbox

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Securebits (linux/securebits.h): uid 0 gains nothing at execve, and none
// of this can be undone.
const (
	secbitNoroot               = 1 << 0
	secbitNorootLocked         = 1 << 1
	secbitNoSetuidFixup        = 1 << 2
	secbitNoSetuidFixupLocked  = 1 << 3
	secbitKeepCapsLocked       = 1 << 5
	secbitNoCapAmbientRaise    = 1 << 6
	secbitNoCapAmbientRaiseLkd = 1 << 7
)

// dropPrivileges empties this thread's capability bounding set, clears the
// ambient set, locks the securebits so that being uid 0 inside the user
// namespace grants nothing at execve, drops every capability and sets
// no_new_privs. Capabilities are per thread: the caller has locked it.
func dropPrivileges() error {
	for c := 0; ; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) { // past the last capability
				break
			}
			return err
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return err
	}
	bits := secbitNoroot | secbitNorootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
		secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLkd
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
		return err
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return err
	}
	return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
}
