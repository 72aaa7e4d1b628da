package main

import (
	"strings"
	"testing"

	"github.com/egressd/egressd/policy"
)

// TestExplainAfterForgettingAnIDsOnlyFolderSaysTheIDIsBoundToNoFolder is
// round 18's t5: after state forget --folder O on the id's only folder,
// explain blamed "version memory from an earlier egressd", which this
// operator never ran. It now says the id is bound to no folder, and how
// that comes about.
func TestExplainAfterForgettingAnIDsOnlyFolderSaysTheIDIsBoundToNoFolder(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "a.example"))
	if o := loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "2.0.0", "a.example", "evil.example")); o.Result != policy.Pending {
		t.Fatalf("widening: %+v", o)
	}
	if out, errs, code := runCLI(t, "state", "--state", state, "forget", "--folder", dir); code != exitOK {
		t.Fatalf("forget --folder: exit %d\n%s%s", code, out, errs)
	}
	out, errs, _ := runCLI(t, "explain", "--state", state, "--manifest", dir, "evil.example")
	if strings.HasPrefix(out, "allow") || strings.Contains(out+errs, "earlier egressd binds") ||
		!strings.Contains(out+errs, "binds to no folder (it was forgotten with state forget --folder") || !strings.Contains(out+errs, "state forget --folder") {
		t.Fatalf("explain after forget --folder of the id's only folder:\n%s%s", out, errs)
	}
}
