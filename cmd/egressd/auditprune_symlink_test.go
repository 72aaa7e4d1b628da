package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPruneOfAFileNamedThroughALinkSaysSo is round 42's F1: prune of a run
// file named through a symbolic link refused with "replaced while it was
// held: it is not the file verified", which points at tampering that
// never happened. The refusal stays (prune removes the file it verified,
// by its own name) and says it is a link.
func TestPruneOfAFileNamedThroughALinkSaysSo(t *testing.T) {
	state, dir, key := t.TempDir(), erpFolder(t, t.TempDir(), "com.acme.erp", "1.0.0", "erp.acme.example"), testKey(t)
	files := unsandboxedRuns(t, state, dir, key, 2)
	link := filepath.Join(t.TempDir(), "run1.log")
	if err := os.Symlink(files[0], link); err != nil {
		t.Fatal(err)
	}
	receipt := filepath.Join(t.TempDir(), "receipt.log")
	out, errs, code := runBinary(t, "audit", "prune", "--key", key, "--receipt", receipt, "--keep", files[1], link)
	if code != exitFail || !strings.Contains(errs, link+": is a symbolic link") || strings.Contains(errs, "replaced") {
		t.Fatalf("prune through a link: exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(files[0]); err != nil {
		t.Fatalf("the run's file: %v", err)
	}
}
