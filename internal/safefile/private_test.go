package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenPrivateRefusesWhatAFolderOwnerCanPlant: a symlink, a hard link
// and a named pipe at the name are refused (the pipe without blocking), and
// a new file is created 0600.
func TestOpenPrivateRefusesWhatAFolderOwnerCanPlant(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("x"), 0o644)
	os.Symlink(victim, filepath.Join(dir, "soft"))
	os.Link(victim, filepath.Join(dir, "hard"))
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600)
	for name, want := range map[string]string{"soft": "is a symlink", "hard": "hard links", "fifo": "named pipe"} {
		path := filepath.Join(dir, name)
		err := readWithGuard(t, func() error {
			f, err := OpenPrivate(path, unix.O_APPEND)
			if err == nil {
				f.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	f, err := OpenPrivate(filepath.Join(dir, "new"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st, _ := f.Stat(); st.Mode().Perm() != 0o600 {
		t.Errorf("new file mode %v", st.Mode().Perm())
	}
	if _, err := ReadRegularNoFollow(filepath.Join(dir, "soft"), 10); err == nil || !strings.Contains(err.Error(), "is a symlink") {
		t.Errorf("ReadRegularNoFollow of a symlink: %v", err)
	}
}
