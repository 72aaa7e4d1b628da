package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h (chattr's i), which
// golang.org/x/sys/unix does not define.
const fsImmutableFL = 0x10

// setImmutable sets or clears a folder's immutable attribute (chattr +i):
// even root can then create, rename or remove nothing in it, while files
// already open in it are still written.
func setImmutable(t *testing.T, dir string, on bool) error {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetInt(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return err
	}
	if on {
		flags |= fsImmutableFL
	} else {
		flags &^= fsImmutableFL
	}
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, flags)
}

// TestARunWhoseLinkFileCannotBeUpdatedAtCloseSaysSoAndExitsNonZero is
// issue 13 (f13o item 5): at close, egressd run records its last hash in
// STATE/audit/ID.lastrun for the next run's genesis, and the error of that
// write was dropped: the run exited 0 and nobody learned that the link
// still said "open CHAIN". Here the audit folder is made immutable while
// the program runs (no temporary file can be made for the atomic
// replace). The run says so on stderr, naming the file and the error, and
// exits 1 although its program exited 0; the next run still links to it
// (as a run open when it started), so verify of both is intact.
func TestARunWhoseLinkFileCannotBeUpdatedAtCloseSaysSoAndExitsNonZero(t *testing.T) {
	state, dir, key := t.TempDir(), erpFolder(t, t.TempDir(), "com.acme.erp", "1.0.0", "erp.acme.example"), testKey(t)
	auditDir := filepath.Join(state, "audit")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, egressdBinary(t), "run", "--insecure-env-only", "--state", state, "--audit-key", key, dir, "--", "sh", "-c", "echo ready; read x; exit 0")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the program did not start: %q %v\n%s", line, err, errb.String())
	}
	t.Cleanup(func() { setImmutable(t, auditDir, false) }) // before t.TempDir removes it
	if err := setImmutable(t, auditDir, true); err != nil {
		stdin.Close()
		cmd.Wait()
		if os.Getenv("CI") == "true" {
			t.Fatalf("chattr +i on %s: %v", auditDir, err)
		}
		t.Skipf("the file system of %s has no immutable attribute: %v", auditDir, err)
	}
	stdin.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFail {
		t.Fatalf("the link file could not be updated at close: %v, want exit 1\n%s", err, errb.String())
	}
	link := filepath.Join(auditDir, "com.acme.erp.lastrun")
	if !strings.Contains(errb.String(), "egressd run: the audit log closed cleanly, but "+link+" was not updated") || !strings.Contains(errb.String(), "operation not permitted") {
		t.Fatalf("stderr does not name the link file and the error:\n%s", errb.String())
	}
	if err := setImmutable(t, auditDir, false); err != nil {
		t.Fatal(err)
	}
	runs := unsandboxedRuns(t, state, dir, key, 1)
	files, err := filepath.Glob(filepath.Join(auditDir, "com.acme.erp.*.log"))
	if err != nil || len(files) != 2 {
		t.Fatalf("run files: %v %v", files, err)
	}
	if out, errs, code := runBinary(t, "audit", "verify", "--key", key, "--run-files", filepath.Join(auditDir, "com.acme.erp")); code != 0 || !strings.Contains(out, "2 chain(s)") {
		t.Fatalf("verify of the run whose link was not updated and the next (%s): exit %d\n%s%s", runs[0], code, out, errs)
	}
}
