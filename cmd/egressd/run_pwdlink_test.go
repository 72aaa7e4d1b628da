package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pwdLinkFolder is a folder real/ and a link to it, link/, with the
// integration folder real/F inside: a shell that entered it through the
// link has PWD=…/link, a service manager none.
type pwdLinkFolder struct {
	real, link, state string
}

func newPWDLinkFolder(t *testing.T) pwdLinkFolder {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := pwdLinkFolder{real: filepath.Join(base, "real"), link: filepath.Join(base, "link"), state: filepath.Join(base, "state")}
	if err := os.MkdirAll(filepath.Join(d.real, "F"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", d.link); err != nil {
		t.Fatal(err)
	}
	return d
}

// manifest writes real/F's manifest: id at 1.0.0 with hosts.
func (d pwdLinkFolder) manifest(t *testing.T, id string, hosts ...string) {
	t.Helper()
	doc := `{"schemaVersion":1,"id":"` + id + `","version":"1.0.0","runtime":{"kind":"local-mcp","command":"sh","args":["x"]},` +
		`"permissions":[{"kind":"network","domains":["` + strings.Join(hosts, `","`) + `"]}]}`
	if err := os.WriteFile(filepath.Join(d.real, "F", "voiceos.integration.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// environ is the test's environment with PWD set to pwd, or without PWD
// when pwd is "" (a service manager's start).
func environ(pwd string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PWD=") {
			env = append(env, kv)
		}
	}
	if pwd != "" {
		env = append(env, "PWD="+pwd)
	}
	return env
}

// TestRunOfARelativeFolderFromAShellThatEnteredThroughALinkIsRefused:
// "egressd run F" typed in one folder must name one place, whatever $PWD
// says. Started once with no PWD (an MCP host, a service), the folder is
// bound to its id; its author changes the id and widens the list; the
// operator types the same command in the same folder from a shell that
// entered it through a link (PWD=…/link). filepath.Abs trusted PWD, named
// …/link/F, a place never seen, and loaded the new id's wider list as a
// first load. Now the relative path is refused, naming both spellings,
// and nothing loads; given from /, the real spelling holds the change for
// approval.
func TestRunOfARelativeFolderFromAShellThatEnteredThroughALinkIsRefused(t *testing.T) {
	requireSandbox(t)
	bin := egressdBinary(t)
	d := newPWDLinkFolder(t)
	run := func(pwd, folder string) (string, error) {
		cmd := exec.Command(bin, "run", "--state", d.state, "--resolver", "127.0.0.1:9", folder, "--", "/bin/true")
		cmd.Dir, cmd.Env = d.link, environ(pwd)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	d.manifest(t, "com.test.pwd.a", "a.example")
	if out, err := run("", "F"); err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	d.manifest(t, "com.test.pwd.b", "a.example", "evil.example")
	out, err := run(d.link, "F")
	if err == nil || !strings.Contains(out, "entered through a link") || !strings.Contains(out, filepath.Join(d.link, "F")) {
		t.Fatalf("a relative folder from a shell with PWD=%s was not refused: %v\n%s", d.link, err, out)
	}
	list, err := exec.Command(bin, "state", "--state", d.state, "list").CombinedOutput()
	if err != nil {
		t.Fatalf("state list: %v\n%s", err, list)
	}
	if strings.Contains(string(list), d.link) || strings.Contains(string(list), "com.test.pwd.b") {
		t.Fatalf("the refused run left a record:\n%s", list)
	}
	out, err = run(d.link, filepath.Join(d.real, "F"))
	if err != nil || !strings.Contains(out, "changed its id from com.test.pwd.a to com.test.pwd.b 1.0.0") {
		t.Fatalf("the id change at the folder's own place was not held for approval: %v\n%s", err, out)
	}
}
