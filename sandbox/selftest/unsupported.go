//go:build !linux

package selftest

import (
	"context"
	"errors"
)

// Off Linux there is no sandbox ("egressd run" refuses), so the process
// and kernel probes have nothing to test and say so as OPEN: nothing would
// stop them.

func landlockABI() int { return 0 }

func procProbes() []probe { return nil }

func kernelProbes() []probe {
	return []probe{{"process-and-kernel", LayerSeccomp, func(context.Context, *Config) (string, string) {
		return opened("egressd run has no sandbox on this system: nothing stops a program from reaching other processes or the kernel")
	}}}
}

func hostPoolProbes() []probe { return nil }

func noteInherited([]int) {}

type lentTerminal struct{}

func (*lentTerminal) changes() []string { return nil }
func (*lentTerminal) close()            {}

// LendTerminal needs Linux.
func (b *Beacons) LendTerminal() error {
	return errors.New("no pseudo-terminal to lend on this system")
}

// ReturnStdin has nothing to return off Linux.
func (b *Beacons) ReturnStdin() {}

// capturedStdout has nothing to capture: off Linux no sandbox runs.
type capturedStdout struct{}

// CaptureStdout is a no-op off Linux.
func (b *Beacons) CaptureStdout() error { return nil }

// ReturnStdout has nothing to return off Linux.
func (b *Beacons) ReturnStdout() []byte { return nil }

// runKillableChild has no probes the kernel kills off Linux.
func runKillableChild(string) int { return 2 }
