package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
	dirs  []*os.File // each file's folder as it was when held: removal goes through it
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
			twice := h.holding(f)
			f.Close()
			h.Release()
			switch {
			case twice != "":
				return nil, fmt.Errorf("%s is given twice (also as %s)", name, twice)
			case errors.Is(err, unix.EWOULDBLOCK):
				return nil, fmt.Errorf("%s is held by a running egressd process (the audit log's lock): its run is not over", name)
			}
			return nil, fmt.Errorf("%s: taking its lock: %w", name, err)
		}
		dir, err := heldIn(name, f)
		if err != nil {
			f.Close()
			h.Release()
			return nil, err
		}
		h.names, h.files, h.dirs = append(h.names, name), append(h.files, f), append(h.dirs, dir)
	}
	return h, nil
}

// holding names the path a file held already was given as, or "".
func (h *Held) holding(f *os.File) string {
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	for i, g := range h.files {
		if gs, err := g.Stat(); err == nil && os.SameFile(st, gs) {
			return h.names[i]
		}
	}
	return ""
}

// heldIn opens the folder that holds f under name, checking that it does.
func heldIn(name string, f *os.File) (*os.File, error) {
	dir, err := os.Open(filepath.Dir(name))
	if err != nil {
		return nil, err
	}
	if err := sameEntry(dir, filepath.Base(name), f); err != nil {
		dir.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return dir, nil
}

// sameEntry checks that dir's entry base is the file f, not a link or
// another file put in its place.
func sameEntry(dir *os.File, base string, f *os.File) error {
	var at, held unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), base, &at, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if err := unix.Fstat(int(f.Fd()), &held); err != nil {
		return err
	}
	if at.Mode&unix.S_IFMT == unix.S_IFLNK {
		// Named through a link (round 42: "replaced while it was held"
		// sent the operator looking for tampering that never happened).
		return errors.New("is a symbolic link: name the audit file itself, which prune removes")
	}
	if at.Dev != held.Dev || at.Ino != held.Ino {
		return errors.New("replaced while it was held: it is not the file verified")
	}
	return nil
}

// Remove removes each held file through the folder it was held in, after
// checking the entry there is still that file, and calls removed with its
// name. Through the folder, not the path: a parent renamed and a link put
// in its place while prune waited would have made the path name another
// folder's file (round 37: prune removed an archive's copy it never
// verified, and the file it verified stayed).
func (h *Held) Remove(removed func(name string)) error {
	for i, f := range h.files {
		base := filepath.Base(h.names[i])
		if err := sameEntry(h.dirs[i], base, f); err != nil {
			return fmt.Errorf("%s %w", h.names[i], err)
		}
		if err := unix.Unlinkat(int(h.dirs[i].Fd()), base, 0); err != nil {
			return fmt.Errorf("%s: %w", h.names[i], err)
		}
		removed(h.names[i])
	}
	return nil
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
	for _, d := range h.dirs {
		d.Close()
	}
	h.files, h.names, h.dirs = nil, nil, nil
}
