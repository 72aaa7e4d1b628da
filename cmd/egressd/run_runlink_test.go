package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRunWhoseMiddleRunLogWasDeletedFailsVerifyNamingIt is issue 13's b6:
// each egressd run writes its own file, STATE/audit/ID.PID.log, and every
// genesis said prev_run=none, so deleting the file of the run that
// exfiltrated left "audit verify --key" saying each run follows the run
// before it. A run's genesis names the previous run of the same id (a link
// file in the state folder), so the gap is found; and run honours the
// config's audit.checkpoints.
func TestRunWhoseMiddleRunLogWasDeletedFailsVerifyNamingIt(t *testing.T) {
	e := newSandboxEnv(t)
	key := filepath.Join(t.TempDir(), "audit.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	yaml := "audit:\n  key_file: " + key + "\n  checkpoints: stderr\n"
	var files []string
	for i := 0; i < 3; i++ {
		cmd := e.configured(yaml, "true")
		for j, a := range cmd.Args { // the default per-run file, not the test's one log
			if a == "--audit-log" {
				cmd.Args = append(cmd.Args[:j:j], cmd.Args[j+2:]...)
				break
			}
		}
		_, errs, code := runCmd(t, cmd)
		m := regexp.MustCompile(`egressd run: audit log (\S+)`).FindStringSubmatch(errs)
		if code != 0 || m == nil || !strings.HasPrefix(m[1], filepath.Join(e.state, "audit")+"/") {
			t.Fatalf("run %d: exit %d\n%s", i, code, errs)
		}
		if !regexp.MustCompile(`(?m)^\{"event":"checkpoint","chain":"[0-9a-f]+","seq":\d+,"hash":"[0-9a-f]{64}"(,"integration":"[^"]+")?\}$`).MatchString(errs) {
			t.Fatalf("run %d wrote no checkpoint although its config says checkpoints: stderr:\n%s", i, errs)
		}
		files = append(files, m[1])
	}
	out, errs, code := runCLI(t, append([]string{"audit", "verify", "--key", key}, files...)...)
	if code != 0 || !strings.Contains(out, "each run follows the run before it") {
		t.Fatalf("three linked runs: exit %d\n%s%s", code, out, errs)
	}
	lines := readLines(t, files[1])
	lastHash := regexp.MustCompile(`"hash":"([0-9a-f]{64})"\}$`).FindStringSubmatch(lines[len(lines)-1])[1]
	os.Remove(files[1])
	out, errs, code = runCLI(t, "audit", "verify", "--key", key, files[0], files[2])
	if code != 1 || !strings.Contains(out, "was appended after an earlier run (ending in hash "+lastHash+") that is not in the files given") {
		t.Fatalf("the middle run's file deleted: exit %d\n%s%s", code, out, errs)
	}
}

// TestRunCheckpointHiddenAtTheEndOfALongStderrLineStillCatchesADeletedLog
// is round 9's b1: the sandboxed program wrote 70,000 bytes without a
// newline to stderr, so egressd's closing checkpoint landed at the end of
// a line longer than the checkpoint reader's 64 KiB buffer, which skipped
// it. With that run's log deleted, "audit verify --key --checkpoints"
// said intact. The checkpoint at the end of a long line is found, so the
// deleted run's chain is missed and verify fails.
func TestRunCheckpointHiddenAtTheEndOfALongStderrLineStillCatchesADeletedLog(t *testing.T) {
	e := newSandboxEnv(t)
	key := filepath.Join(t.TempDir(), "audit.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	yaml := "audit:\n  key_file: " + key + "\n  checkpoints: stderr\n"
	var files []string
	var journal strings.Builder
	for i, script := range []string{"true", `head -c 70000 /dev/zero | tr '\0' A >&2`} {
		cmd := e.configured(yaml, script)
		for j, a := range cmd.Args { // the default per-run file
			if a == "--audit-log" {
				cmd.Args = append(cmd.Args[:j:j], cmd.Args[j+2:]...)
				break
			}
		}
		_, errs, code := runCmd(t, cmd)
		m := regexp.MustCompile(`egressd run: audit log (\S+)`).FindStringSubmatch(errs)
		if code != 0 || m == nil {
			t.Fatalf("run %d: exit %d\n%.2000s", i, code, errs)
		}
		files = append(files, m[1])
		journal.WriteString(errs)
	}
	if !strings.Contains(journal.String(), strings.Repeat("A", 70000)+`{"event":"checkpoint"`) && !strings.Contains(journal.String(), strings.Repeat("A", 70000)+"\n") {
		t.Fatalf("the program's 70,000 bytes are not in the journal")
	}
	ckpt := filepath.Join(t.TempDir(), "journal.txt")
	if err := os.WriteFile(ckpt, []byte(journal.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := verify(t, "--key", key, "--checkpoints", ckpt, files[0], files[1]); code != 0 || strings.Contains(out, " 0 checkpoints cross-checked") {
		t.Fatalf("both runs' logs: exit %d\n%s", code, out)
	}
	os.Remove(files[1])
	if out, code := verify(t, "--key", key, "--checkpoints", ckpt, files[0]); code != 1 || !strings.Contains(out, "match no chain in the files given") {
		t.Fatalf("the second run's log deleted: exit %d\n%s", code, out)
	}
}
