package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/egressd/egressd/policy"
)

// TestEveryApprovePreviewOfAnIDChangeToAHeldIDNamesTheHolderAndItsLockout
// is round 28's second approve finding (s2.sh), on the real binary: f
// (com.a) changes its id to com.b 9.0.0, which folder g holds at 1.0.0,
// with a list no wider than com.b's. approve --folder --digest (the
// command egressd prints) and approve ID VERSION previewed it as a plain
// rename of f, without naming g and without the list in force after;
// approving it moves com.b to 9.0.0 and g's next load is refused as a
// rollback. Every preview path (and state list) now shows the folders
// bound to com.b, the list in force at f's next load, and g's lockout.
func TestEveryApprovePreviewOfAnIDChangeToAHeldIDNamesTheHolderAndItsLockout(t *testing.T) {
	state, f, g := t.TempDir(), t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, g, "com.b", "1.0.0", "b.example", "c.example"))
	loadAsServe(t, state, erpFolder(t, f, "com.a", "1.0.0", "a.example"))
	if o := loadAsServe(t, state, erpFolder(t, f, "com.b", "9.0.0", "b.example")); o.Result != policy.Pending {
		t.Fatalf("f's id change does not wait: %+v", o)
	}
	g, f = policy.ManifestPlace(filepath.Join(g, "manifest.json")), policy.ManifestPlace(filepath.Join(f, "manifest.json"))
	want := []string{
		"in force at the next load: com.b 9.0.0 (b.example)",
		"com.b is bound to folder " + g + " too: approving this shares com.b with it",
		"folder " + g + " runs com.b 1.0.0: its next load will be refused as lower than 9.0.0",
	}
	lacks := func(out string) []string {
		var missing []string
		for _, w := range want {
			if !strings.Contains(out, w) {
				missing = append(missing, w)
			}
		}
		return missing
	}
	list := stateList(t, state)
	cmd := regexp.MustCompile(`egressd approve --state \S+ --folder \S+ --digest \S+ com\.b 9\.0\.0`).FindString(list)
	if cmd == "" {
		t.Fatalf("state list prints no command for f's change:\n%s", list)
	}
	if m := lacks(list); m != nil {
		t.Errorf("state list lacks %q:\n%s", m, list)
	}
	out, errs, code := runBinary(t, "approve", "--state", state, "com.b", "9.0.0")
	if code != exitFail || lacks(errs) != nil {
		t.Errorf("approve ID VERSION: exit %d, lacks %q:\n%s%s", code, lacks(errs), out, errs)
	}
	out, errs, code = runBinary(t, "approve", "--state", state, "--manifest", f)
	if code != exitUsage || lacks(out) != nil {
		t.Errorf("approve --manifest preview: exit %d, lacks %q:\n%s%s", code, lacks(out), out, errs)
	}
	out, errs, code = runBinary(t, "approve", "--state", state, "--folder", f, "--digest", strings.Fields(cmd)[7], "com.b", "9.0.0")
	if code != exitUsage || lacks(out) != nil {
		t.Errorf("approve --folder --digest preview: exit %d, lacks %q:\n%s%s", code, lacks(out), out, errs)
	}
	if _, err := os.Stat(filepath.Join(state, "versions.json")); err != nil {
		t.Fatal(err)
	}
	out, errs, code = runBinary(t, append(strings.Fields(cmd)[1:], "--yes")...)
	if code != exitOK || strings.Count(out, want[2]) != 2 || strings.Count(out, want[1]) != 2 {
		t.Errorf("approve --yes does not show g's lockout before and after: exit %d\n%s%s", code, out, errs)
	}
	// What the preview said is what happens: f loads com.b 9.0.0, and g's
	// next load is refused as lower than 9.0.0.
	if o := loadAsServe(t, state, f); o.Result != policy.Loaded {
		t.Fatalf("f's approved change: %+v", o)
	}
	if o := loadAsServe(t, state, g); o.Err == nil || !strings.Contains(o.Err.Error(), "lower than 9.0.0") {
		t.Fatalf("g's next load is not what the preview said: %+v", o)
	}
}
