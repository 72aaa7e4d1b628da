package sandbox

import "golang.org/x/sys/unix"

// unlessOff runs one layer's setup. Only a test binary (built with the
// egressd_testhooks tag) can switch a layer off; see layerOff.
func unlessOff(layer string, setup func() error) error {
	if layerOff(layer) {
		return nil
	}
	return setup()
}

// markInheritedCloexec keeps every descriptor above stderr from crossing
// the next exec: a socket or folder leaked to egressd must not reach the
// sandbox.
func markInheritedCloexec() error {
	return unlessOff("fd", func() error { return unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) })
}
