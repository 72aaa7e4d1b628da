package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditLogPlantedAsALinkIsNotWrittenThrough is issue 13's B1 for the
// audit folder: "egressd run" as root writes STATE/audit/ID.PID.log, in a
// folder the service user may own. A symlink or a hard link planted at that
// name made root append audit lines to the file it points at. Now the open
// refuses both and names the path; the target is untouched.
func TestAuditLogPlantedAsALinkIsNotWrittenThrough(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(victim, []byte("root secret\n"), 0o644)
	soft, hard := filepath.Join(dir, "soft.log"), filepath.Join(dir, "hard.log")
	if err := os.Symlink(victim, soft); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(victim, hard); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{soft, hard} {
		f, err := OpenFile(path, 0)
		if err == nil {
			f.Close()
			t.Errorf("%s: opened", path)
		} else if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s: %v", path, err)
		}
	}
	if data, _ := os.ReadFile(victim); string(data) != "root secret\n" {
		t.Fatalf("the target changed: %q", data)
	}
	f, err := OpenFile(filepath.Join(dir, "audit.log"), 0) // an ordinary new file still opens
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestRunLinkPlantedAsASymlinkIsNotRead: audit-stdout.link sits in the
// state folder, which may be the service user's. Pointed at a root-only
// file holding 64 hex digits (a key, a token), serve as root copied them
// into every new genesis as prev_run, where the folder's owner can read
// them. A link there is not followed.
func TestRunLinkPlantedAsASymlinkIsNotRead(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
	link := filepath.Join(t.TempDir(), "audit-stdout.link")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	if got, _ := readRunLink(link); got != Unreadable {
		t.Fatalf("prev_run = %q, read through the symlink", got)
	}
}
