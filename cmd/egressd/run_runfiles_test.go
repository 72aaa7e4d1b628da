package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestVerifyRunFilesTakesOneIDsRunsAndRotatedFilesInStartOrder is round
// 19's t1 (first results), t4 and t6: the README's recipe globbed
// ID.*.log, which also matched the files of an integration whose id is
// ID.7 (ids may hold digit-only parts, and a name alone cannot tell
// com.x.7.PID.log from com.x's PID.N.log), missed a file rotated by
// logrotate's rename and SIGUSR1 (ID.PID.log.1), and piped into xargs,
// which splits a long list into two verify runs. --run-files STATE/audit/ID
// finds the id's files, rotated ones included and the other id's left out
// by the integration their genesis names, and orders them; --files-from
// takes the list whole.
func TestVerifyRunFilesTakesOneIDsRunsAndRotatedFilesInStartOrder(t *testing.T) {
	e := newSandboxEnv(t)
	key := filepath.Join(t.TempDir(), "audit.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	yaml := "audit:\n  key_file: " + key + "\n  checkpoints: stderr\n"
	other := t.TempDir()
	os.Chmod(other, 0o755)
	m, _ := os.ReadFile(filepath.Join(e.dir, "voiceos.integration.json"))
	os.WriteFile(filepath.Join(other, "voiceos.integration.json"), []byte(strings.Replace(string(m), `"com.test.sandboxed"`, `"com.test.sandboxed.7"`, 1)), 0o644)
	auditDir := filepath.Join(e.state, "audit")
	var journal strings.Builder
	var known, mine []string
	runOnce := func(folder string) {
		cmd := e.configured(yaml, "true")
		cmd.Args = e.perRunCommand(yaml, folder)
		_, errs, code := runCmd(t, cmd)
		journal.WriteString(errs)
		f := regexp.MustCompile(`egressd run: audit log (\S+)`).FindStringSubmatch(errs)
		if code != 0 || f == nil {
			t.Fatalf("run in %s: exit %d\n%s", folder, code, errs)
		}
		known = append(known, f[1])
		if folder == e.dir {
			mine = append(mine, f[1])
		}
	}
	runOnce(e.dir)
	runOnce(other)
	// A run whose file logrotate renames, then SIGUSR1: it goes on in a
	// new file at the same path.
	cmd := e.configured(yaml, "true")
	cmd.Args = e.perRunScript(yaml, e.dir, "echo ready; read x")
	_, proceed := e.pausedRun(cmd)
	all, _ := filepath.Glob(filepath.Join(auditDir, "*.log"))
	var running string
	for _, f := range all {
		if !slices.Contains(known, f) {
			running = f
		}
	}
	if running == "" {
		t.Fatalf("the paused run's file is not in %v", all)
	}
	if err := os.Rename(running, running+".1"); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGUSR1)
	waitFor(t, &lockedFile{path: running}, `"action":"genesis"`)
	rest, code := proceed()
	journal.WriteString(rest)
	if code != 0 {
		t.Fatalf("the rotated run: exit %d\n%s", code, rest)
	}
	known = append(known, running)
	mine = append(mine, running+".1", running)
	runOnce(e.dir)
	runOnce(other)
	ckpt := filepath.Join(t.TempDir(), "journal")
	os.WriteFile(ckpt, []byte(journal.String()), 0o600)

	out, errs, code := runCLI(t, "audit", "verify", "--key", key, "--checkpoints", ckpt, "--run-files", filepath.Join(auditDir, "com.test.sandboxed"))
	if code != 0 || strings.Count(out, ", closed cleanly\n") != 3 || !strings.Contains(out, "other integrations (com.test.sandboxed.7) ignored") {
		t.Fatalf("--run-files of one id: exit %d\n%s%s", code, out, errs)
	}
	list := filepath.Join(t.TempDir(), "files")
	os.WriteFile(list, []byte(strings.Join(mine, "\n")+"\n"), 0o600)
	out, errs, code = runCLI(t, "audit", "verify", "--key", key, "--checkpoints", ckpt, "--files-from", list)
	if code != 0 || strings.Count(out, ", closed cleanly\n") != 3 {
		t.Fatalf("--files-from a list in start order: exit %d\n%s%s", code, out, errs)
	}
	fromStdin := exec.Command(egressdBinary(t), "audit", "verify", "--key", key, "--checkpoints", ckpt, "--files-from", "-")
	fromStdin.Stdin = strings.NewReader(strings.Join(mine, "\n") + "\n")
	stdout, err := fromStdin.CombinedOutput()
	if err != nil || strings.Count(string(stdout), ", closed cleanly\n") != 3 {
		t.Fatalf("--files-from - (stdin): %v\n%s", err, stdout)
	}
}
