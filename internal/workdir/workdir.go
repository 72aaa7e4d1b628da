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
//
// When $PWD does name the working directory through another spelling (the
// shell came in through a link), a relative path is refused: the operator
// who typed "F" in /srv/current meant the link's place, which stays one
// place when "current" moves to the next release, and the kernel's answer
// (/srv/releases/v1) would become a new place at that swap, where a new id
// loads as a first load. Neither answer is safe to guess; an absolute path
// says which.
package workdir

import (
	"errors"
	"fmt"
	"os"
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
// them); a relative one is joined to Get and cleaned, unless $PWD names
// the working directory through a link (see the package comment).
func Abs(path string) (string, error) {
	if filepath.IsAbs(path) {
		return filepath.Clean(path), nil
	}
	dir, err := Get()
	if err != nil {
		return "", err
	}
	if pwd := os.Getenv("PWD"); throughLink(pwd, dir) {
		return "", fmt.Errorf("%q is relative and the working directory %s was entered through a link as %s: give it from / (%s, or %s) so its place does not depend on the way in",
			path, dir, pwd, filepath.Join(pwd, path), filepath.Join(dir, path))
	}
	return filepath.Join(dir, path), nil
}

// throughLink reports whether pwd is another spelling of the directory dir
// (a link on its path). A $PWD that names another directory (stale after
// a chdir that did not update it) is not a spelling of this one and is
// ignored, as is one that is not absolute.
func throughLink(pwd, dir string) bool {
	if !filepath.IsAbs(pwd) || filepath.Clean(pwd) == dir {
		return false
	}
	a, err := os.Stat(pwd)
	if err != nil {
		return false
	}
	b, err := os.Stat(dir)
	return err == nil && os.SameFile(a, b)
}
