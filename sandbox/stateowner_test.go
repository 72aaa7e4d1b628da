//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestTidyStateFolderFollowsNoSymlinkAndCountsWhatIsThere: the walk that
// re-owns the folder and clears setuid bits must not reach through a
// symlink the program planted, and it measures the folder for the
// state_mb check.
func TestTidyStateFolderFollowsNoSymlinkAndCountsWhatIsThere(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	os.WriteFile(victim, []byte("host"), 0o4755)
	syscall.Chmod(victim, 0o4755)
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", "suid"), make([]byte, 3<<20), 0o755)
	syscall.Chmod(filepath.Join(dir, "sub", "suid"), 0o6755)
	os.Symlink(victim, filepath.Join(dir, "link"))
	os.Symlink(outside, filepath.Join(dir, "dirlink"))
	use, err := TidyStateFolder(dir, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "sub", "suid")); st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("setuid bit left: %v", st.Mode())
	}
	if st, _ := os.Stat(victim); st.Mode()&os.ModeSetuid == 0 {
		t.Error("the walk followed a symlink out of the folder")
	}
	if use.Files != 4 || use.Bytes < 3<<20 {
		t.Errorf("use %+v, want 4 entries and at least 3 MB", use)
	}
	l := Limits{StateMB: 2}
	if err := l.CheckState(use); err == nil || !strings.Contains(err.Error(), "over sandbox_limits.state_mb (2 MB)") {
		t.Errorf("CheckState: %v", err)
	}
}
