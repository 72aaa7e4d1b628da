//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestStateImagePlantedInTheStateFolderIsRefused is issue 13's B1 for the
// sandbox's state images: STATE/sandbox-images may belong to the service
// user, who can put a file of its own (a crafted filesystem), or a hard
// link to another file, where root's image should be. Root mounted what it
// found there as the integration's state. Now an image must be a regular
// file with one link, owned by egressd's own user, or it is refused before
// any loop device is attached, naming the file.
func TestStateImagePlantedInTheStateFolderIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("state images need root in CI")
		}
		t.Skip("state images need root")
	}
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, make([]byte, 1<<20), 0o600)
	planted := map[string]func(path string) error{
		"owned by the service user": func(path string) error {
			if err := os.WriteFile(path, make([]byte, 1<<20), 0o600); err != nil {
				return err
			}
			return os.Chown(path, 4242, 4242)
		},
		"a hard link": func(path string) error { return os.Link(victim, path) },
		"a symlink":   func(path string) error { return os.Symlink(victim, path) },
	}
	for name, plant := range planted {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".ext4")
		if err := plant(path); err != nil {
			t.Fatal(err)
		}
		mount, err := MountStateImage(path, 8, 4242, "")
		if err == nil {
			mount.Close()
			t.Errorf("%s: mounted", name)
			continue
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v", name, err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(victim, &st); err != nil || st.Uid != 0 || st.Mode&0o777 != 0o600 {
		t.Fatalf("the victim changed: %+v %v", st, err)
	}
}
