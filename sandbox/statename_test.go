//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateNameIsTheFolderAsWellAsTheID: two folders claiming one id get
// two names, neither of which any id spells.
func TestStateNameIsTheFolderAsWellAsTheID(t *testing.T) {
	a, b := StateName("com.acme.erp", "/srv/erp"), StateName("com.acme.erp", "/home/mallory/erp")
	if a == b || a != StateName("com.acme.erp", "/srv/erp") || !strings.HasPrefix(a, "com.acme.erp@") || strings.Contains(a, "/") {
		t.Fatalf("names %q %q", a, b)
	}
}

// TestClaimStateTakesOverTheIDOnlyNameOnlyWhenTold: the folder and image
// an earlier egressd named after the id move to the new name only when the
// caller passes the legacy name; a symlink in their place is never taken.
func TestClaimStateTakesOverTheIDOnlyNameOnlyWhenTold(t *testing.T) {
	parent, images := t.TempDir(), t.TempDir()
	useTempHostUIDRecord(t)
	os.Mkdir(filepath.Join(parent, "com.acme.erp"), 0o700)
	os.WriteFile(filepath.Join(parent, "com.acme.erp", "data"), []byte("a's"), 0o600)
	os.WriteFile(filepath.Join(images, "com.acme.erp.ext4"), []byte("image"), 0o600)

	other := StateName("com.acme.erp", "/home/mallory/erp")
	dir, _, err := ClaimStateFolder(parent, other, "")
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a folder not told to take over got %v", entries)
	}
	if img, err := ClaimStateImage(images, other, ""); err != nil || img != filepath.Join(images, other+".ext4") {
		t.Fatalf("image %q %v", img, err)
	}
	if _, err := os.Stat(filepath.Join(images, other+".ext4")); !os.IsNotExist(err) {
		t.Fatalf("an image appeared for a folder not told to take over: %v", err)
	}

	owner := StateName("com.acme.erp", "/srv/erp")
	dir, _, err = ClaimStateFolder(parent, owner, "com.acme.erp")
	if data, _ := os.ReadFile(filepath.Join(dir, "data")); err != nil || string(data) != "a's" {
		t.Fatalf("the owner did not take over its folder: %v %q", err, data)
	}
	if img, err := ClaimStateImage(images, owner, "com.acme.erp"); err != nil {
		t.Fatal(err)
	} else if data, _ := os.ReadFile(img); string(data) != "image" {
		t.Fatalf("the owner did not take over its image: %q", data)
	}

	// A symlink in the legacy folder's place is not followed or moved.
	target := t.TempDir()
	os.Symlink(target, filepath.Join(parent, "com.acme.crm"))
	crm := StateName("com.acme.crm", "/srv/crm")
	dir, _, err = ClaimStateFolder(parent, crm, "com.acme.crm")
	if st, lerr := os.Lstat(dir); err != nil || lerr != nil || !st.IsDir() {
		t.Fatalf("claim beside a symlink: %v %v", err, lerr)
	}
	if _, err := os.Lstat(filepath.Join(parent, "com.acme.crm")); err != nil {
		t.Fatalf("the symlink was moved: %v", err)
	}
}
