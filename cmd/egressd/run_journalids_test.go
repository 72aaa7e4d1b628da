package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// perRunCommand is e.configured running the integration in folder, with
// the default per-run audit file STATE/audit/ID.PID.log.
func (e *sandboxEnv) perRunCommand(yaml, folder string) []string {
	return e.perRunScript(yaml, folder, "true")
}

// perRunScript is perRunCommand running script.
func (e *sandboxEnv) perRunScript(yaml, folder, script string) []string {
	cmd := e.configured(yaml, script)
	var args []string
	for j := 0; j < len(cmd.Args); j++ {
		switch cmd.Args[j] {
		case "--audit-log":
			j++
			continue
		case e.dir:
			args = append(args, folder)
			continue
		}
		args = append(args, cmd.Args[j])
	}
	return args
}

// TestVerifyOfOneIntegrationsRunsWithTheWholeJournalIgnoresOtherIntegrations
// is round 19's t1: two integrations run on one host and their checkpoints
// go to one journal. The README says to give audit verify the whole
// journal, but checkpoints named no integration, so verifying one id's
// intact files failed on the other id's checkpoints ("match no chain in
// the files given"). Checkpoints now name the run files' stem: the other
// id's are reported as ignored, and the deletion of this id's last run,
// which only its checkpoints reveal, still fails.
func TestVerifyOfOneIntegrationsRunsWithTheWholeJournalIgnoresOtherIntegrations(t *testing.T) {
	e := newSandboxEnv(t)
	key := filepath.Join(t.TempDir(), "audit.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	yaml := "audit:\n  key_file: " + key + "\n  checkpoints: stderr\n"
	other := t.TempDir()
	os.Chmod(other, 0o755)
	m, _ := os.ReadFile(filepath.Join(e.dir, "voiceos.integration.json"))
	// An id that begins with the first one's and a dot: ids may hold dots.
	os.WriteFile(filepath.Join(other, "voiceos.integration.json"), []byte(strings.Replace(string(m), `"com.test.sandboxed"`, `"com.test.sandboxed.x"`, 1)), 0o644)
	var mine, all []string
	var journal strings.Builder
	for i := 0; i < 4; i++ {
		folder := e.dir
		if i%2 == 1 {
			folder = other
		}
		args := e.perRunCommand(yaml, folder)
		cmd := e.configured(yaml, "true")
		cmd.Args = args
		_, errs, code := runCmd(t, cmd)
		journal.WriteString(errs)
		f := regexp.MustCompile(`egressd run: audit log (\S+)`).FindStringSubmatch(errs)
		if code != 0 || f == nil {
			t.Fatalf("run %d: exit %d\n%s", i, code, errs)
		}
		if folder == e.dir {
			mine = append(mine, f[1])
		}
		all = append(all, f[1])
	}
	ckpt := filepath.Join(t.TempDir(), "journal")
	os.WriteFile(ckpt, []byte(journal.String()), 0o600)
	out, errs, code := runCLI(t, append([]string{"audit", "verify", "--key", key, "--checkpoints", ckpt}, mine...)...)
	if code != 0 || !strings.Contains(out, "checkpoint(s) of other integrations (com.test.sandboxed.x) ignored") {
		t.Fatalf("one id's intact runs with the whole journal: exit %d\n%s%s", code, out, errs)
	}
	// Both ids' files given together, in start order: no false finding
	// of a deleted link file, but how to verify them.
	out, errs, code = runCLI(t, append([]string{"audit", "verify", "--key", key, "--checkpoints", ckpt}, all...)...)
	if code != 1 || strings.Contains(out, "link file was deleted") || !strings.Contains(out, "verify each integration's files separately") {
		t.Fatalf("two ids' runs given together: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = runCLI(t, "audit", "verify", "--key", key, "--checkpoints", ckpt, mine[0])
	if code != 1 || !strings.Contains(out, "match no chain in the files given") {
		t.Fatalf("this id's last run deleted: exit %d\n%s%s", code, out, errs)
	}
	// The first run pruned: its receipt and the run kept verify with the
	// whole journal too (the receipt names the integration it pruned).
	receipt := filepath.Join(t.TempDir(), "receipt.log")
	out, errs, code = runCLI(t, "audit", "prune", "--key", key, "--checkpoints", ckpt, "--receipt", receipt, "--keep", mine[1], mine[0])
	if code != 0 {
		t.Fatalf("prune: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = runCLI(t, "audit", "verify", "--key", key, "--checkpoints", ckpt, receipt, mine[1])
	if code != 0 || !strings.Contains(out, "other integrations (com.test.sandboxed.x) ignored") {
		t.Fatalf("the receipt and the run kept, with the whole journal: exit %d\n%s%s", code, out, errs)
	}
}

// TestAnotherIntegrationsJournalDoesNotClearARunWithItsLinkRewrittenNorLetPruneLaunderIt:
// run R2 of one id deleted and the link file garbled before R3 started:
// verify said BROKEN without checkpoints, and "intact" once a journal
// holding only another integration's checkpoints was given (the lost link
// became a note whatever the checkpoints held); and prune --keep R4, given a
// journal holding R2's own checkpoints, ignored them as the kept runs' and
// wrote a receipt that verified intact (round 20 trust-chain attacker).
func TestAnotherIntegrationsJournalDoesNotClearARunWithItsLinkRewrittenNorLetPruneLaunderIt(t *testing.T) {
	e := newSandboxEnv(t)
	key := filepath.Join(t.TempDir(), "audit.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	quiet := "audit:\n  key_file: " + key + "\n  checkpoints: none\n"
	loud := "audit:\n  key_file: " + key + "\n  checkpoints: stderr\n"
	other := t.TempDir()
	os.Chmod(other, 0o755)
	m, _ := os.ReadFile(filepath.Join(e.dir, "voiceos.integration.json"))
	os.WriteFile(filepath.Join(other, "voiceos.integration.json"), []byte(strings.Replace(string(m), `"com.test.sandboxed"`, `"com.test.other"`, 1)), 0o644)
	run := func(yaml, folder string, journal *strings.Builder) string {
		t.Helper()
		cmd := e.configured(yaml, "true")
		cmd.Args = e.perRunCommand(yaml, folder)
		_, errs, code := runCmd(t, cmd)
		f := regexp.MustCompile(`egressd run: audit log (\S+)`).FindStringSubmatch(errs)
		if code != 0 || f == nil {
			t.Fatalf("run: exit %d\n%s", code, errs)
		}
		if journal != nil {
			journal.WriteString(errs)
		}
		return f[1]
	}
	garble := func(runFile string) {
		link := filepath.Join(filepath.Dir(runFile), "com.test.sandboxed.lastrun")
		if err := os.WriteFile(link, []byte("junk\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Checkpoints off for this id; another id's in the journal.
	var journal strings.Builder
	r1 := run(quiet, e.dir, nil)
	r2 := run(quiet, e.dir, nil)
	run(loud, other, &journal)
	os.Remove(r2)
	garble(r1)
	r3 := run(quiet, e.dir, nil)
	ckpt := filepath.Join(t.TempDir(), "journal")
	os.WriteFile(ckpt, []byte(journal.String()), 0o600)
	if out, errs, code := runCLI(t, "audit", "verify", "--key", key, "--checkpoints", ckpt, r1, r3); code == 0 {
		t.Fatalf("another integration's checkpoints cleared a run whose link was rewritten: exit 0\n%s%s", out, errs)
	}

	// Checkpoints on for this id: R2's own are in the journal; prune of
	// R1 and R3 keeping R4 must not take them as the kept runs'.
	journal.Reset()
	s1 := run(loud, e.dir, &journal)
	s2 := run(loud, e.dir, &journal)
	os.Remove(s2)
	garble(s1)
	s3 := run(loud, e.dir, &journal)
	s4 := run(loud, e.dir, &journal)
	os.WriteFile(ckpt, []byte(journal.String()), 0o600)
	receipt := filepath.Join(t.TempDir(), "receipt.log")
	if out, errs, code := runCLI(t, "audit", "prune", "--key", key, "--checkpoints", ckpt, "--receipt", receipt, "--keep", s4, s1, s3); code == 0 {
		t.Fatalf("prune laundered a deleted run into a receipt: exit 0\n%s%s", out, errs)
	}
}

// TestAPrunedRunPutBackIsACopyAndASecondPruneWithTheJournalWorks: after a
// prune, a copy of the pruned run's file put back verified intact with
// the journal (its own checkpoints cleared it), though the receipt lists
// its chain as removed; and a second prune with the journal was refused,
// blaming a missing run for the chain the first receipt removed (round 21
// trust-chain attacker, two MEDIUMs).
func TestAPrunedRunPutBackIsACopyAndASecondPruneWithTheJournalWorks(t *testing.T) {
	e := newSandboxEnv(t)
	key := filepath.Join(t.TempDir(), "audit.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	yaml := "audit:\n  key_file: " + key + "\n  checkpoints: stderr\n"
	var journal strings.Builder
	var runs []string
	for range 4 {
		cmd := e.configured(yaml, "true")
		cmd.Args = e.perRunCommand(yaml, e.dir)
		_, errs, code := runCmd(t, cmd)
		f := regexp.MustCompile(`egressd run: audit log (\S+)`).FindStringSubmatch(errs)
		if code != 0 || f == nil {
			t.Fatalf("run: exit %d\n%s", code, errs)
		}
		journal.WriteString(errs)
		runs = append(runs, f[1])
	}
	ckpt := filepath.Join(t.TempDir(), "journal")
	os.WriteFile(ckpt, []byte(journal.String()), 0o600)
	copyOfFirst, _ := os.ReadFile(runs[0])
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.log"), filepath.Join(dir, "second.log")
	if out, errs, code := runCLI(t, "audit", "prune", "--key", key, "--checkpoints", ckpt, "--receipt", first, "--keep", runs[1], runs[0]); code != 0 {
		t.Fatalf("first prune: exit %d\n%s%s", code, out, errs)
	}
	planted := filepath.Join(filepath.Dir(runs[0]), "com.test.sandboxed.99999.log")
	os.WriteFile(planted, copyOfFirst, 0o600)
	for _, order := range [][]string{
		{first, planted, runs[1], runs[2], runs[3]},
		{planted, first, runs[1], runs[2], runs[3]}, // the receipt after the copy (round 22)
		{planted, runs[1], runs[2], runs[3], first},
	} {
		if out, errs, code := runCLI(t, append([]string{"audit", "verify", "--key", key, "--checkpoints", ckpt}, order...)...); code == 0 || !strings.Contains(out+errs, "a copy of a pruned run was put back") {
			t.Fatalf("a pruned run put back verified: exit %d\n%s%s", code, out, errs)
		}
	}
	os.Remove(planted)
	if out, errs, code := runCLI(t, "audit", "prune", "--key", key, "--checkpoints", ckpt, "--receipt", second, "--keep", runs[2], first, runs[1]); code != 0 {
		t.Fatalf("second prune with the journal: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := runCLI(t, "audit", "verify", "--key", key, "--checkpoints", ckpt, second, runs[2], runs[3]); code != 0 {
		t.Fatalf("after two prunes: exit %d\n%s%s", code, out, errs)
	}
}
