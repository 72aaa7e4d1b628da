package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/egressd/egressd/policy"
)

// mkdirNamed makes dir/name, a folder, and returns it.
func mkdirNamed(t *testing.T, dir, name string) string {
	t.Helper()
	sub := filepath.Join(dir, name)
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	return sub
}

// TestForgetFolderNamedManifestJSONDoesNotForgetItsParentsBinding is
// round 30's s7c.sh: folder m is bound to com.x; a folder inside it
// literally named manifest.json claims com.x. The claim notice's way out,
// "state forget --folder m/manifest.json", was read as the manifest file
// of m and forgot m's (the owner's) binding. A path that is a folder is a
// folder place whatever its name.
func TestForgetFolderNamedManifestJSONDoesNotForgetItsParentsBinding(t *testing.T) {
	state, m := t.TempDir(), t.TempDir()
	doc := `{"schemaVersion":1,"id":"com.x","name":"x","version":"1.0.0","runtime":{"kind":"local-mcp","command":"node","args":["s.mjs"]},"permissions":[{"kind":"network","domains":["x.example"]}]}`
	if err := os.WriteFile(filepath.Join(m, "voiceos.integration.json"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if o := loadAsServe(t, state, m); o.Result != policy.Loaded {
		t.Fatalf("m's first load: %+v", o)
	}
	y := mkdirNamed(t, m, "manifest.json")
	if o := loadAsServe(t, state, erpFolder(t, y, "com.x", "1.0.0", "x.example")); o.Result != policy.Pending {
		t.Fatalf("the folder named manifest.json does not wait as a claim of com.x: %+v", o)
	}
	if out, errs, code := runBinary(t, "state", "--state", state, "forget", "--folder", y); code != exitOK {
		t.Fatalf("forget --folder %s: exit %d\n%s%s", y, code, out, errs)
	}
	list := stateList(t, state)
	if !strings.Contains(list, "folder "+m+": com.x") || strings.Contains(list, y) {
		t.Fatalf("forget --folder of the folder named manifest.json did not forget that folder's claim alone:\n%s", list)
	}
	// m still owns com.x: the folder named manifest.json claims it again.
	if o := loadAsServe(t, state, y); o.Result != policy.Pending || !strings.Contains(o.Notice, "binds to folder "+m+";") {
		t.Fatalf("the owner lost its binding: %+v", o)
	}
}

// TestApproveAsPrintedForAFolderNamedManifestJSONApprovesThatFolder is
// round 30's s7.sh: a folder named manifest.json changes its id; the
// approve --folder command egressd prints names that folder, and was read
// as the manifest file of its parent, so it failed as printed.
func TestApproveAsPrintedForAFolderNamedManifestJSONApprovesThatFolder(t *testing.T) {
	state := t.TempDir()
	y := mkdirNamed(t, t.TempDir(), "manifest.json")
	loadAsServe(t, state, erpFolder(t, y, "com.a", "1.0.0", "a.example"))
	if o := loadAsServe(t, state, erpFolder(t, y, "com.b", "2.0.0", "a.example", "b.example")); o.Result != policy.Pending {
		t.Fatalf("the id change does not wait: %+v", o)
	}
	cmd := regexp.MustCompile(`egressd approve --state \S+ --folder \S+ --digest \S+ com\.b 2\.0\.0`).FindString(stateList(t, state))
	if !strings.Contains(cmd, "--folder "+y+" ") {
		t.Fatalf("state list prints no approve command naming %s: %q", y, cmd)
	}
	if out, errs, code := runBinary(t, append(strings.Fields(cmd)[1:], "--yes")...); code != exitOK {
		t.Fatalf("approve as printed: exit %d\n%s%s", code, out, errs)
	}
	if o := loadAsServe(t, state, y); o.Result != policy.Loaded || o.ID != "com.b" {
		t.Fatalf("the approved change did not load: %+v", o)
	}
}
