package sandbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// OpenFolder opens the integration folder once, as an O_PATH descriptor
// that follows path's symlinks now and never again. The author controls
// the path (a deploy link it flips between releases, or at /), so
// everything after this open must go through the descriptor: the manifest
// read, the program's resolution and the folder's bind mount.
func OpenFolder(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// FolderPath is the real path of the folder held open: where it is now on
// the host, every symlink resolved, read from the descriptor.
func FolderPath(folder *os.File) (string, error) {
	return os.Readlink(fmt.Sprintf("/proc/self/fd/%d", folder.Fd()))
}

// fileID is the identity of the file fd refers to.
func fileID(fd int) (FileID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return FileID{}, err
	}
	return FileID{Dev: st.Dev, Ino: st.Ino}, nil
}

// cloneFolder makes the detached mount of the folder held open, as root:
// open_tree on the descriptor itself, never on its path.
func cloneFolder(folder *os.File) (int, error) {
	fd, err := unix.OpenTree(int(folder.Fd()), "", unix.AT_EMPTY_PATH|unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return -1, fmt.Errorf("sandbox: open %s: %w", folder.Name(), err)
	}
	return fd, nil
}
