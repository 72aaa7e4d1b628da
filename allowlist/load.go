package allowlist

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/egressd/egressd/internal/safefile"
	"github.com/egressd/egressd/internal/workdir"
	"golang.org/x/sys/unix"
)

// maxManifestBytes bounds how much of a manifest is read. Real manifests are
// a few KiB; a larger file is refused rather than read into memory.
const maxManifestBytes = 1 << 20

// Locate returns the manifest file for path: path itself if it is a file, or
// the one manifest file inside it if it is a folder (see pickManifest).
func Locate(path string) (string, error) {
	if err := utf8Path(path); err != nil {
		return "", err
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.IsDir() && standardName(path) {
		// A folder in a manifest file's place: read as a folder, its own
		// manifest.json would load as a new place's first load (round 32:
		// the operator's unchanged --manifest a/manifest.json ran a new id
		// with any list once the author swapped the file for a folder).
		return "", folderInAManifestsPlace(path)
	}
	folder := path
	if !st.IsDir() {
		if !standardName(path) {
			return path, nil
		}
		folder = filepath.Dir(path)
	}
	entries, err := safefile.ReadDir(folder)
	if err != nil {
		return "", err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	found, err := pickManifest(folder, names)
	if folder != path && err == nil {
		return path, nil // the folder's one manifest, named directly
	}
	return found, err
}

// folderInAManifestsPlace refuses a folder at path, a manifest file's name.
func folderInAManifestsPlace(path string) error {
	return fmt.Errorf("%s: is a folder, not a regular file: a path named like a manifest file must be the manifest itself (name the folder that holds it)", path)
}

// standardName reports whether file has one of the two names a folder's
// manifest is found by, the names that make the folder its place (see
// policy.ManifestPlace). Named directly, such a file must be its folder's
// only manifest: with both present, the second would be taken for the
// first with a changed id and run under its approved list. A folder holds
// one integration by those names, whichever of its files is named.
func standardName(file string) bool {
	base := filepath.Base(file)
	return base == VoiceOSFile || base == SollarFile
}

// pickManifest is the one manifest file among names, the entries of the
// folder at path. A folder holding both formats is refused, since which
// list applies would be a guess; so is a name that is a manifest's only
// under case folding (Voiceos.integration.json, MANIFEST.JSON): on a
// case-insensitive file system (macOS, Windows, a reviewer's checkout) it
// is that manifest, so the folder would hold a second list egressd never
// read, or hold egressd's under a name it does not look for. Names Windows
// opens as a manifest's (a trailing dot or space, a ":stream" suffix) are
// refused the same way.
func pickManifest(path string, names []string) (string, error) {
	var found []string
	for _, name := range names {
		for _, want := range []string{VoiceOSFile, SollarFile} {
			switch {
			case name == want:
				found = append(found, filepath.Join(path, name))
			case strings.EqualFold(name, want):
				return "", fmt.Errorf("%s: %q is a manifest file name in another case (a case-insensitive file system reads it as %s); a manifest file must be named exactly %q", path, name, want, want)
			case strings.EqualFold(asWindowsOpensIt(name), want):
				return "", fmt.Errorf("%s: %q is a manifest file name as Windows reads it (it drops trailing dots and spaces and a \":stream\" suffix, so it opens %s); a manifest file must be named exactly %q", path, name, want, want)
			}
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%s: no %s or %s in this folder", path, VoiceOSFile, SollarFile)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("%s: holds both %s and %s, and a folder holds one integration by those names (either file would be taken for the other's integration); keep one", path, VoiceOSFile, SollarFile)
}

// asWindowsOpensIt is the name Win32 opens for name: an NTFS stream suffix
// (":stream", "::$DATA") names a stream of the file before it, and trailing
// dots and spaces are dropped.
func asWindowsOpensIt(name string) string {
	name, _, _ = strings.Cut(name, ":")
	return strings.TrimRight(name, ". ")
}

// Load locates, reads and parses a manifest. file is the manifest file that
// was read. err is an I/O problem (missing, unreadable, not a regular file,
// too large); manifest problems are in ps, and m is nil when any is an
// Error.
func Load(path string, rules *Rules) (m *Manifest, file string, ps Problems, err error) {
	file, err = Locate(path)
	if err != nil {
		return nil, "", nil, err
	}
	data, err := readCapped(file)
	if err != nil {
		return nil, file, nil, err
	}
	m, ps = Parse(filepath.Base(file), data, rules)
	return m, file, ps, nil
}

// readCapped reads a manifest that must be a regular file (after symlinks)
// of at most maxManifestBytes, without blocking on a pipe or a device.
func readCapped(file string) ([]byte, error) { return safefile.ReadRegular(file, maxManifestBytes) }

// LoadIn is Load through the folder held open as folder (an O_PATH
// descriptor of the folder path names, or of the folder holding the
// manifest file path names): the folder is not looked up by name again,
// so a deploy link flipped after it was opened changes nothing, and the
// manifest file itself must not be a symlink.
func LoadIn(folder *os.File, path string, rules *Rules) (m *Manifest, file string, ps Problems, err error) {
	if err := utf8Path(path); err != nil {
		return nil, "", nil, err
	}
	if path != folder.Name() {
		file = path // a manifest file in the folder
		if standardName(file) {
			if _, err := locateIn(folder, filepath.Dir(file)); err != nil {
				return nil, "", nil, err
			}
		}
	} else if standardName(path) {
		return nil, "", nil, folderInAManifestsPlace(path) // see Locate
	} else if file, err = locateIn(folder, path); err != nil {
		return nil, "", nil, err
	}
	data, err := safefile.ReadRegularAt(folder, filepath.Base(file), file, maxManifestBytes)
	if err != nil {
		return nil, file, nil, err
	}
	m, ps = Parse(filepath.Base(file), data, rules)
	return m, file, ps, nil
}

// locateIn is Locate in the folder held open as folder, at path.
func locateIn(folder *os.File, path string) (string, error) {
	fd, err := unix.Openat(int(folder.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &fs.PathError{Op: "open", Path: path, Err: err}
	}
	dir := os.NewFile(uintptr(fd), path)
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return "", err
	}
	return pickManifest(path, names)
}

// utf8Path refuses a manifest whose path (made absolute) is not valid
// UTF-8. Version memory names the places it binds ids to as JSON text,
// which holds only UTF-8: a folder "app\xff" was written as "app\uFFFD",
// the name of another folder, which then ran as the first one's id with
// no claim notice while the real one was refused as a claim.
func utf8Path(path string) error {
	abs, err := workdir.Abs(path)
	if err != nil {
		abs = path
	}
	if !utf8.ValidString(abs) {
		return fmt.Errorf("%q: the path is not valid UTF-8; egressd names the places it binds ids to as UTF-8 text, where two such paths could share one name: rename the folder", abs)
	}
	return nil
}
