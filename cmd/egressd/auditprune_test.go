package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/egressd/egressd/audit"
)

// TestPruningOldRunsLeavesAReceiptVerifyAcceptsAndADeletionStillFails is
// f13g item 6: an operator who deleted the oldest egressd run files (a
// retention policy) had verify fail for ever on the next run's link, as it
// does for an attacker's deletion. audit prune verifies the files, writes
// a keyed receipt, and removes them; verify accepts the receipt in their
// place (their checkpoints too), while a file deleted without a receipt,
// or a receipt written without the key, still fails.
func TestPruningOldRunsLeavesAReceiptVerifyAcceptsAndADeletionStillFails(t *testing.T) {
	e := newSandboxEnv(t)
	key := filepath.Join(t.TempDir(), "audit.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	yaml := "audit:\n  key_file: " + key + "\n  checkpoints: stderr\n"
	var files []string
	var firstStderr string
	for i := 0; i < 3; i++ {
		cmd := e.configured(yaml, "true")
		for j, a := range cmd.Args { // the default per-run file
			if a == "--audit-log" {
				cmd.Args = append(cmd.Args[:j:j], cmd.Args[j+2:]...)
				break
			}
		}
		_, errs, code := runCmd(t, cmd)
		m := regexp.MustCompile(`egressd run: audit log (\S+)`).FindStringSubmatch(errs)
		if code != 0 || m == nil {
			t.Fatalf("run %d: exit %d\n%s", i, code, errs)
		}
		if i == 0 {
			firstStderr = errs
		}
		files = append(files, m[1])
	}
	if out, code := verify(t, "--key", key, files[1], files[2]); code != 1 || !strings.Contains(out, "egressd audit prune") {
		t.Fatalf("the oldest run left out without a receipt: exit %d\n%s", code, out)
	}
	receipt := filepath.Join(t.TempDir(), "pruned.log")
	run1 := chainOf(t, files[0])
	out, errs, code := runCLI(t, "audit", "prune", "--key", key, "--receipt", receipt, "--keep", files[1], files[0])
	if _, err := os.Stat(files[0]); code != 0 || err == nil || !strings.Contains(out, "removed "+files[0]) || !strings.Contains(out, "run "+run1+" ("+files[0]+"): ") {
		t.Fatalf("prune: exit %d (file still there: %v)\n%s%s", code, err == nil, out, errs)
	}
	if out, code := verify(t, "--key", key, receipt, files[1], files[2]); code != 0 || !strings.Contains(out, "removed with egressd audit prune") {
		t.Fatalf("verify with the receipt in place of the pruned run: exit %d\n%s", code, out)
	}
	ckpt := filepath.Join(t.TempDir(), "stderr.log")
	os.WriteFile(ckpt, []byte(firstStderr), 0o600)
	if out, code := verify(t, "--key", key, "--checkpoints", ckpt, receipt, files[1], files[2]); code != 0 || !strings.Contains(out, "a prune receipt says its run was removed") {
		t.Fatalf("verify with the pruned run's checkpoints: exit %d\n%s", code, out)
	}

	// Pruning again takes the receipt with the next run; the first run's
	// checkpoints are still accounted for.
	receipt2 := filepath.Join(t.TempDir(), "pruned2.log")
	if out, errs, code := runCLI(t, "audit", "prune", "--key", key, "--receipt", receipt2, "--keep", files[2], receipt, files[1]); code != 0 {
		t.Fatalf("second prune: exit %d\n%s%s", code, out, errs)
	}
	if out, code := verify(t, "--key", key, "--checkpoints", ckpt, receipt2, files[2]); code != 0 || !strings.Contains(out, "a prune receipt says its run was removed") {
		t.Fatalf("verify after a second prune: exit %d\n%s", code, out)
	}

	// An attacker deletes the receipt with the runs: no receipt covers them.
	if out, code := verify(t, "--key", key, files[2]); code != 1 {
		t.Fatalf("runs deleted without a receipt verify: exit %d\n%s", code, out)
	}
	// And a receipt written without the key is not egressd's.
	hash := regexp.MustCompile(`prev_run=([0-9a-f]{64})`).FindStringSubmatch(readLines(t, files[2])[0])[1]
	forged := filepath.Join(t.TempDir(), "forged.log")
	f, err := audit.OpenFile(forged, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.New(f, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Write(audit.Event{Kind: audit.Lifecycle, Action: audit.Pruned, Msg: "through=" + hash + " runs=1 lines=1"})
	l.Close()
	f.Close()
	if out, code := verify(t, "--key", key, forged, files[2]); code != 1 {
		t.Fatalf("a receipt forged without the key verifies: exit %d\n%s", code, out)
	}
}

// TestPruneRefusesAnUnkeyedLog: whoever can delete an unkeyed log's files
// can write an unkeyed receipt too, so prune refuses, and removes nothing.
func TestPruneRefusesAnUnkeyedLog(t *testing.T) {
	files, _ := realLog(t, false)
	receipt := filepath.Join(t.TempDir(), "pruned.log")
	_, errs, code := runCLI(t, "audit", "prune", "--receipt", receipt, "--keep", files[1], files[0], files[1])
	if _, err := os.Stat(files[0]); code != 1 || err != nil || !strings.Contains(errs, "the log is not keyed") {
		t.Fatalf("prune of an unkeyed log: exit %d (file removed: %v)\n%s", code, err != nil, errs)
	}
}
