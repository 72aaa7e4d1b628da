// Package workdir makes a path absolute against the working directory the
// kernel holds for the process (getcwd(2)), never against $PWD.
//
// filepath.Abs uses os.Getwd, which returns $PWD whenever $PWD names the
// working directory, so a shell that entered a folder through a symbolic
// link makes "F" its link spelling, and a service manager (no $PWD) or a
// shell that entered it otherwise makes "F" the real one. egressd keys
// version memory, id bindings and sandbox state by the place a path
// names, with the symbolic links the operator typed kept (a deploy link
// "current" stays one place), so the same command typed in the same
// folder must name one place whatever the environment says: an id change
// waiting at the folder's usual place was loaded as a first load at the
// $PWD spelling. The environment is the caller's to set; the kernel's
// working directory is where a relative path is really opened from.
package workdir

import (
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Get is the kernel's working directory: symbolic links resolved, $PWD
// not read. It fails when there is none to name (the folder was removed,
// or it is outside this process's root).
func Get() (string, error) {
	dir, err := unix.Getwd()
	if err != nil {
		return "", errors.New("cannot read the working directory: " + err.Error())
	}
	return dir, nil
}

// Abs is filepath.Abs against the kernel's working directory: an absolute
// path is only cleaned (its symbolic links kept, as the operator typed
// them); a relative one is joined to Get and cleaned.
func Abs(path string) (string, error) {
	if filepath.IsAbs(path) {
		return filepath.Clean(path), nil
	}
	dir, err := Get()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, path), nil
}
