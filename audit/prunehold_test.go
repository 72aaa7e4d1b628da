package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPruneRemovesTheFileItHeldEvenAfterItsFolderIsSwappedForALink: round
// 37's prune_swap.py. While prune waited between its last check and the
// removal, the audit folder's parent was renamed and a link to an archive
// holding a copy of the same name put in its place: removing by path
// deleted the archive's copy, never verified, and left the file verified.
// Removal goes through the folder held since the lock was taken.
func TestPruneRemovesTheFileItHeldEvenAfterItsFolderIsSwappedForALink(t *testing.T) {
	root := t.TempDir()
	audit, archive := filepath.Join(root, "audit"), filepath.Join(root, "archive")
	for _, d := range []string{audit, archive} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "run.log"), []byte(d), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h, err := Hold([]string{filepath.Join(audit, "run.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if err := os.Rename(audit, audit+".real"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(archive, audit); err != nil {
		t.Fatal(err)
	}
	var removed []string
	if err := h.Remove(func(name string) { removed = append(removed, name) }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(archive, "run.log")); err != nil {
		t.Fatalf("the archive's copy, never held, was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(audit+".real", "run.log")); !os.IsNotExist(err) {
		t.Fatalf("the file held is still there: %v", err)
	}
	if len(removed) != 1 {
		t.Fatalf("removed: %v", removed)
	}
}

// TestPruneOfAFileGivenTwiceSaysSo: round 37's prune_dup.sh. The second
// copy's lock is prune's own; the refusal blamed a running egressd.
func TestPruneOfAFileGivenTwiceSaysSo(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "run.log")
	if err := os.WriteFile(name, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Hold([]string{name, filepath.Join(dir, ".", "run.log")})
	if err == nil || !strings.Contains(err.Error(), "is given twice") {
		t.Fatalf("Hold of one file twice: %v", err)
	}
}
