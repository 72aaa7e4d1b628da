package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// crashRuns runs egressd run once per letter of plan, each with a keyed log
// in its default per-run file and checkpoints to stderr: 'c' closes
// cleanly, 'k' is killed with SIGKILL once its program runs (no shutdown
// record), 'l' is left running (its stop function ends it cleanly). It
// returns the files in start order, the key file, the checkpoint journal
// and the stop functions of the live runs.
func crashRuns(t *testing.T, e *sandboxEnv, plan string) (files []string, key, journal string, stop []func()) {
	t.Helper()
	key = filepath.Join(e.state, "audit.key")
	if _, err := os.Stat(key); err != nil {
		os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	}
	yaml := "audit:\n  key_file: " + key + "\n  key_id: k1\n  checkpoints: stderr\n"
	var journalText strings.Builder
	for i, what := range plan {
		cmd := e.configured(yaml, "echo ready; read x")
		for j, a := range cmd.Args { // the default per-run file
			if a == "--audit-log" {
				cmd.Args = append(cmd.Args[:j:j], cmd.Args[j+2:]...)
				break
			}
		}
		errb := &stderrWatch{logged: make(chan struct{})}
		cmd.Stderr = errb
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if s := bufio.NewScanner(stdout); !s.Scan() || s.Text() != "ready" {
			t.Fatalf("run %d did not start its program:\n%s", i+1, errb.String())
		}
		done := func() {
			stdin.Close()
			cmd.Wait()
			journalText.WriteString(errb.String())
		}
		switch what {
		case 'c':
			done()
		case 'k':
			cmd.Process.Kill()
			cmd.Wait()
			journalText.WriteString(errb.String())
		case 'l':
			stop = append(stop, done)
		}
		select { // a safety net, not a wait for an event: the line comes before the program starts
		case <-errb.logged:
		case <-time.After(2 * time.Minute):
		}
		m := auditLogLine.FindStringSubmatch(errb.String())
		if m == nil {
			t.Fatalf("run %d names no audit log:\n%s", i+1, errb.String())
		}
		files = append(files, m[1])
	}
	journal = filepath.Join(t.TempDir(), "journal.txt")
	os.WriteFile(journal, []byte(journalText.String()), 0o600)
	return files, key, journal, stop
}

// stderrWatch is the stderr of one egressd run, read by the test while the
// child's copier writes it; logged closes once it names the audit log.
type stderrWatch struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	logged chan struct{}
}

var auditLogLine = regexp.MustCompile(`egressd run: audit log (\S+)\n`)

func (w *stderrWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := auditLogLine.Match(w.buf.Bytes())
	w.buf.Write(p)
	if !seen && auditLogLine.Match(w.buf.Bytes()) {
		close(w.logged)
	}
	return len(p), nil
}

func (w *stderrWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestACrashedRunsFileIsPrunedAndVerifyNamesTheCrash is issue 13's gap: a
// run killed with SIGKILL never writes its shutdown record, so prune
// refused its file for ever and the per-run folder grew without bound.
// Once no process holds its file, prune removes it with the runs around
// it, and the receipt keeps the crash: verify names it, the run's
// checkpoints are accounted for, and the newest crash can go too (the run
// after it names it, though not its end).
func TestACrashedRunsFileIsPrunedAndVerifyNamesTheCrash(t *testing.T) {
	e := newSandboxEnv(t)
	files, key, journal, _ := crashRuns(t, e, "ckcc")
	crashed := chainOf(t, files[1])
	receipt := filepath.Join(t.TempDir(), "pruned.log")
	out, errs, code := runCLI(t, "audit", "prune", "--key", key, "--checkpoints", journal, "--receipt", receipt, "--keep", files[3], files[0], files[1], files[2])
	if _, err := os.Stat(files[1]); code != 0 || err == nil || !strings.Contains(out, "run "+crashed+" ("+files[1]+"): ") {
		t.Fatalf("prune of a crashed run's file: exit %d (file still there: %v)\n%s%s", code, err == nil, out, errs)
	}
	named := regexp.MustCompile(`run ` + crashed + ` crashed at seq \d+; pruned by receipt`)
	if out, code := verify(t, "--key", key, "--checkpoints", journal, receipt, files[3]); code != 0 || !named.MatchString(out) {
		t.Fatalf("verify with the receipt: exit %d, want 0 naming the crash of %s\n%s", code, crashed, out)
	}

	// The newest crash: the only run after it names it as the run that
	// was open when it started.
	e = newSandboxEnv(t)
	files, key, journal, _ = crashRuns(t, e, "ck")
	more, _, _, _ := crashRuns(t, e, "c")
	crashed = chainOf(t, files[1])
	receipt = filepath.Join(t.TempDir(), "pruned2.log")
	if out, errs, code := runCLI(t, "audit", "prune", "--key", key, "--checkpoints", journal, "--receipt", receipt, "--keep", more[0], files[0], files[1]); code != 0 {
		t.Fatalf("prune of the newest crashed run: exit %d\n%s%s", code, out, errs)
	}
	if out, code := verify(t, "--key", key, receipt, more[0]); code != 0 || !strings.Contains(out, "run "+crashed+" crashed at seq") {
		t.Fatalf("verify after pruning the newest crash: exit %d\n%s", code, out)
	}
}

// TestALiveRunsFileIsNotPrunedAsCrashed: a run still running when later
// runs start and finish looks, in the files, like a crashed run that later
// runs follow. Its process holds its file's audit lock, so prune refuses
// it and removes nothing; once it has closed, the same prune goes through.
func TestALiveRunsFileIsNotPrunedAsCrashed(t *testing.T) {
	e := newSandboxEnv(t)
	files, key, _, stop := crashRuns(t, e, "clcc")
	receipt := filepath.Join(t.TempDir(), "pruned.log")
	_, errs, code := runCLI(t, "audit", "prune", "--key", key, "--receipt", receipt, "--keep", files[3], files[0], files[1], files[2])
	if code != 1 || !strings.Contains(errs, files[1]+" is held by a running egressd process") {
		t.Fatalf("prune of a live run's file: exit %d\n%s", code, errs)
	}
	stillThere(t, files...)
	if _, err := os.Stat(receipt); err == nil {
		t.Fatal("a refused prune wrote its receipt")
	}
	// The live run closes; the same files verify and prune.
	stop[0]()
	if out, errs, code := runCLI(t, "audit", "prune", "--key", key, "--receipt", receipt, "--keep", files[3], files[0], files[1], files[2]); code != 0 {
		t.Fatalf("prune once the run closed: exit %d\n%s%s", code, out, errs)
	}
}

// TestACrashedRunDeletedByHandStillFailsVerify: the receipt is the only
// way a crashed run's file may go. Deleted by hand, the run after it names
// it as the run open when it started, and verify fails (without a
// checkpoint of it: a short run writes none before it is killed).
func TestACrashedRunDeletedByHandStillFailsVerify(t *testing.T) {
	e := newSandboxEnv(t)
	files, key, _, _ := crashRuns(t, e, "ckcc")
	crashed := chainOf(t, files[1])
	if err := os.Remove(files[1]); err != nil {
		t.Fatal(err)
	}
	if out, code := verify(t, "--key", key, files[0], files[2], files[3]); code != 1 || !strings.Contains(out, crashed) {
		t.Fatalf("verify without the crashed run's file and no receipt: exit %d, want 1 naming %s\n%s", code, crashed, out)
	}
}

// TestACutRunIsNotPrunedAsCrashed: prune verifies first, so a crashed
// run's file cut mid-line, or a clean run whose shutdown record was cut
// off to pass as a crash (the run after it names its real end), is
// refused as before, and nothing is removed.
func TestACutRunIsNotPrunedAsCrashed(t *testing.T) {
	e := newSandboxEnv(t)
	files, key, _, _ := crashRuns(t, e, "ckcc")
	prune := func(keep string, names ...string) (string, int) {
		receipt := filepath.Join(t.TempDir(), "pruned.log")
		_, errs, code := runCLI(t, append([]string{"audit", "prune", "--key", key, "--receipt", receipt, "--keep", keep}, names...)...)
		return errs, code
	}
	whole, _ := os.ReadFile(files[1])
	os.WriteFile(files[1], whole[:len(whole)-10], 0o600)
	if errs, code := prune(files[3], files[0], files[1], files[2]); code != 1 || !strings.Contains(errs, "cut off") {
		t.Fatalf("prune of a crashed run cut mid-line: exit %d\n%s", code, errs)
	}
	os.WriteFile(files[1], whole, 0o600)
	lines := readLines(t, files[2])
	writeLines(t, files[2], lines[:len(lines)-1]) // the clean run 3 now looks crashed
	if errs, code := prune(files[3], files[0], files[1], files[2]); code != 1 || !strings.Contains(errs, "nothing removed") {
		t.Fatalf("prune of a clean run made to look crashed: exit %d\n%s", code, errs)
	}
	stillThere(t, files...)
}
