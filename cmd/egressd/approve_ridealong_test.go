package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRunApprovingAnIDsWideningDoesNotHandTheIDToAFolderThatCopiedIt is
// issue 13's ride-along with egressd run: B's 2.0.0 widening waits; a
// hostile folder C, bound to another id, rewrites its manifest to B's id,
// version and list. The command "egressd state list" prints for B's
// widening approves the widening only: C's id change is its own line, with
// its own command naming C's folder, and C stays refused until then.
func TestRunApprovingAnIDsWideningDoesNotHandTheIDToAFolderThatCopiedIt(t *testing.T) {
	b := newSandboxEnv(t)
	b.writeSandboxed("com.test.b", "1.0.0", "api.allowed.example")
	b.runFresh(`true`)
	c := b.secondFolder("com.test.c", "1.0.0")
	c.writeSandboxed("com.test.c", "1.0.0", "api.allowed.example")
	c.run(`true`)

	b.writeSandboxed("com.test.b", "2.0.0", "api.allowed.example", "evil.example")
	c.writeSandboxed("com.test.b", "2.0.0", "api.allowed.example", "evil.example")
	curlEvil := `curl -sS -m 10 --cacert ca.pem ` + b.url("evil.example") + ` 2>&1; echo rc=$?`
	for e, command := range map[*sandboxEnv]string{
		b: "egressd approve --state " + b.state + " --digest " + digestOf(t, b.dir) + " com.test.b 2.0.0", // the widening, by the digest of the list loaded
		c: "egressd approve --state " + c.state + " --folder " + c.dir + " --digest " + digestOf(t, c.dir) + " com.test.b 2.0.0",
	} {
		if out, errs, _ := e.run(curlEvil); !strings.Contains(out, "rc=56") || !strings.Contains(errs, command) {
			t.Fatalf("2.0.0 does not wait in %s:\nstdout:\n%s\nstderr:\n%s", e.dir, out, errs)
		}
	}

	digest := digestOf(t, b.dir)
	list := stateList(t, b.state)
	cLine := "folder " + c.dir + " (was com.test.c) claims com.test.b 2.0.0, bound to folder " + b.dir + "; pending, digest " + digest +
		": egressd approve --state " + b.state + " --folder " + c.dir + " --digest " + digest + " com.test.b 2.0.0\n"
	if !strings.Contains(list, cLine) || !strings.Contains(list, "adds evil.example: egressd approve --state "+b.state+" --digest "+digest+" com.test.b 2.0.0\n") {
		t.Fatalf("state list does not show C's id change as its own line:\n%s", list)
	}

	out, errs, code := runCLI(t, "approve", "--yes", "--state", b.state, "--digest", digest, "com.test.b", "2.0.0")
	if code != exitOK || strings.Count(out, "approved ") != 1 || !strings.Contains(out, "(a widening)") || strings.Contains(out, c.dir) {
		t.Fatalf("approving B's widening bound more: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, _ := c.run(curlEvil); !strings.Contains(out, "rc=56") || !strings.Contains(errs, "changed its id from com.test.c to com.test.b 2.0.0") {
		t.Fatalf("C rode along with B's approval:\nstdout:\n%s\nstderr:\n%s", out, errs)
	}
	if out, errs, _ := b.run(curlEvil); !strings.Contains(out, "hello from evil.example") {
		t.Fatalf("B's approved widening does not apply:\nstdout:\n%s\nstderr:\n%s", out, errs)
	}
	// C's narrowing to 9.0.0 must not raise B's floor either.
	c.writeSandboxed("com.test.b", "9.0.0", "api.allowed.example")
	c.run(`true`)
	b.writeSandboxed("com.test.b", "3.0.0", "api.allowed.example", "evil.example")
	if out, errs, code := b.run(`echo ran`); code != 0 || !strings.Contains(out, "ran") {
		t.Fatalf("C locked B out: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}

	// C's change, approved by naming its folder, binds C's folder alone.
	out, errs, code = runCLI(t, "approve", "--yes", "--state", b.state, "--folder", c.dir, "--digest", digestOf(t, c.dir), "com.test.b", "9.0.0")
	if code != exitOK || strings.Count(out, "approved ") != 1 || !strings.Contains(out, "the id change of "+c.dir+" from com.test.c") {
		t.Fatalf("approving C's change by its folder: exit %d\n%s%s", code, out, errs)
	}
}

// stateList is "egressd state list" for the state directory.
func stateList(t *testing.T, state string) string {
	t.Helper()
	list, err := exec.Command(egressdBinary(t), "state", "--state", state, "list").CombinedOutput()
	if err != nil {
		t.Fatalf("state list: %v\n%s", err, list)
	}
	return string(list)
}

// TestServeApprovingAnIDsWideningDoesNotHandTheIDToAnotherServedFolder is
// the ride-along with two serve processes sharing version memory: B widens
// to 2.0.0, C's author copies B's id, version and list into C's folder.
// Approving B's widening by its digest leaves C's listener refusing B's
// hosts as pending, and C cannot then narrow B's id to raise its floor.
func TestServeApprovingAnIDsWideningDoesNotHandTheIDToAnotherServedFolder(t *testing.T) {
	dir, state := t.TempDir(), filepath.Join(t.TempDir(), "state")
	write := func(folder, id, version string, hosts ...string) string {
		os.MkdirAll(filepath.Join(dir, folder), 0o755)
		return erpFolder(t, filepath.Join(dir, folder), id, version, hosts...)
	}
	fb := write("b", "com.test.b", "1.0.0", "b.example")
	fc := write("c", "com.test.c", "1.0.0", "c.example")
	sockets := t.TempDir()
	sock := func(n string) string { return filepath.Join(sockets, n+".sock") }
	cfg := func(n string) string {
		p := filepath.Join(dir, n+".yaml")
		os.WriteFile(p, []byte("state_dir: "+state+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+filepath.Join(dir, n+".audit.log")+"}\nintegrations:\n"+
			"  - manifest: "+n+"\n    listen: unix:"+sock(n)+"\n"), 0o600)
		return p
	}
	// serveUntil runs serve for the config of n while fn runs, and returns
	// what it wrote to stderr.
	serveUntil := func(n string, fn func(stderr *lockedBuffer)) string {
		var stdout, stderr lockedBuffer
		sig := make(chan os.Signal, 1)
		done := make(chan int, 1)
		go func() { done <- serve(context.Background(), []string{"--config", cfg(n)}, &stdout, &stderr, sig) }()
		waitFor(t, &stderr, `serving com\.test\.\w+ on unix:`)
		fn(&stderr)
		sig <- syscall.SIGTERM
		<-done
		return stderr.String()
	}
	nothing := func(*lockedBuffer) {}
	serveUntil("b", nothing)
	serveUntil("c", nothing)

	write("b", "com.test.b", "2.0.0", "b.example", "b2.example")
	write("c", "com.test.b", "2.0.0", "b.example", "b2.example")
	serveUntil("b", nothing)
	if errs := serveUntil("c", nothing); !strings.Contains(errs, "changed its id from com.test.c to com.test.b 2.0.0") {
		t.Fatalf("C's id change does not wait:\n%s", errs)
	}
	digest := digestOf(t, fb)
	out, errs, code := runCLI(t, "approve", "--yes", "--state", state, "--digest", digest, "com.test.b", "2.0.0")
	if code != exitOK || strings.Count(out, "approved ") != 1 || strings.Contains(out, fc) {
		t.Fatalf("approving B's widening bound more: exit %d\n%s%s", code, out, errs)
	}
	// Approving B's manifest by its folder binds nothing of C's either
	// (C's listener waits for the same change from com.test.c).
	out, errs, code = runCLI(t, "approve", "--yes", "--state", state, "--manifest", fb)
	if code != exitOK || strings.Contains(out, "listener") || strings.Contains(out, fc) {
		t.Fatalf("approve --manifest of B's folder bound more: exit %d\n%s%s", code, out, errs)
	}
	serveUntil("c", func(*lockedBuffer) {
		for _, host := range []string{"b.example", "b2.example"} {
			if got := unixConnectReason(t, sock("c"), host); got != "pending_approval" {
				t.Fatalf("C's listener asked for B's %s: %s, want pending_approval", host, got)
			}
		}
	})
	serveUntil("b", func(*lockedBuffer) {
		if got := unixConnectReason(t, sock("b"), "b2.example"); got != "dns_error" { // allowed; the resolver is closed
			t.Fatalf("B's approved b2.example: %s", got)
		}
	})

	write("c", "com.test.b", "9.0.0", "b.example")
	serveUntil("c", nothing)
	write("b", "com.test.b", "3.0.0", "b.example", "b2.example")
	serveUntil("b", func(*lockedBuffer) {
		if got := unixConnectReason(t, sock("b"), "b.example"); got != "dns_error" {
			t.Fatalf("B 3.0.0 after C's 9.0.0: %s", got)
		}
	})
}
