package audit

import (
	"errors"
	"fmt"
	"os"

	"github.com/egressd/egressd/internal/safefile"
	"golang.org/x/sys/unix"
)

// Held are audit files egressd audit prune holds with the lock every
// egressd writer takes on its log (OpenFile): while a process writes a
// file, prune cannot hold it, so a run whose file prune holds is over,
// even one that never wrote its shutdown record (killed, power lost). And
// no writer can open a held file until prune lets go, so nothing is
// appended between the verification and the removal.
type Held struct {
	names []string
	files []*os.File
}

// Hold takes the lock of every file without waiting; a file another
// process holds is refused by name, and nothing is kept held.
func Hold(names []string) (*Held, error) {
	h := &Held{}
	for _, name := range names {
		f, err := safefile.OpenRegular(name)
		if err != nil {
			h.Release()
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			h.Release()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%s is held by a running egressd process (the audit log's lock): its run is not over", name)
			}
			return nil, fmt.Errorf("%s: taking its lock: %w", name, err)
		}
		h.names, h.files = append(h.names, name), append(h.files, f)
	}
	return h, nil
}

// StillNamed checks that each path still names the file held: one put in
// its place (renamed over it) is neither locked nor the file verified.
func (h *Held) StillNamed() error {
	for i, f := range h.files {
		held, err := f.Stat()
		if err != nil {
			return err
		}
		atPath, err := os.Lstat(h.names[i])
		if err != nil || !os.SameFile(held, atPath) {
			return fmt.Errorf("%s was replaced while it was held: it is not the file verified", h.names[i])
		}
	}
	return nil
}

// Release lets go of every file.
func (h *Held) Release() {
	for _, f := range h.files {
		f.Close()
	}
	h.files, h.names = nil, nil
}
