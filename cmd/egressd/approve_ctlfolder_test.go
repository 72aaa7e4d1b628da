package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTheCommandPrintedForAFolderWithATabApprovesThatFolderNotAnother is
// the eleventh attacker's third break: state list printed the approve
// command of a folder named w<TAB>x with its TAB shown as \t, so pasted
// it approved the pending id change of ANOTHER folder, literally named
// w\tx. A path holding a control character is now printed in bash's
// ANSI-C quoting ($'…\x09…'), which reproduces its bytes when pasted.
func TestTheCommandPrintedForAFolderWithATabApprovesThatFolderNotAnother(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash: $'…' is what the printed command is for")
	}
	root, state := t.TempDir(), t.TempDir()
	tab, literal := filepath.Join(root, "w\tx"), filepath.Join(root, `w\tx`)
	for _, d := range []string{tab, literal} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	loadAsServe(t, state, erpFolder(t, tab, "com.acme.aaa", "1.0.0", "api.acme.example"))
	loadAsServe(t, state, erpFolder(t, literal, "com.acme.bbb", "1.0.0", "api.acme.example"))
	for _, d := range []string{tab, literal} {
		loadAsServe(t, state, erpFolder(t, d, "com.acme.new", "1.0.0", "api.acme.example", "evil.example"))
	}
	list := stateList(t, state)
	line := regexp.MustCompile(`(?m)\(was com\.acme\.aaa\) changes its id to com\.acme\.new 1\.0\.0; pending, digest \S+: (egressd approve .*)$`).FindStringSubmatch(list)
	if line == nil || strings.Contains(line[1], `"`) {
		t.Fatalf("state list does not print the TAB folder's command as a command:\n%s", list)
	}
	sh := exec.Command(bash, "-c", strings.Replace(line[1], "egressd approve ", "egressd approve --state "+state+" ", 1)+" --yes") // no terminal here to confirm on
	sh.Env = append(os.Environ(), "PATH="+filepath.Dir(egressdBinary(t))+":"+os.Getenv("PATH"))
	if out, err := sh.CombinedOutput(); err != nil || !strings.Contains(string(out), "from com.acme.aaa") {
		t.Fatalf("the printed command %q, run by bash: %v\n%s", line[1], err, out)
	}
	list = stateList(t, state)
	if !regexp.MustCompile(`\(was com\.acme\.aaa\) changes its id to com\.acme\.new 1\.0\.0; approved`).MatchString(list) ||
		!regexp.MustCompile(`\(was com\.acme\.bbb\) changes its id to com\.acme\.new 1\.0\.0; pending`).MatchString(list) {
		t.Fatalf("the command approved another folder, or none:\n%s", list)
	}
}
