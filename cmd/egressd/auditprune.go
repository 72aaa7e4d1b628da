package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/termsafe"
)

// runAuditPrune is "egressd audit prune": the operator's retention of old
// runs' files (egressd run's ID.PID.log). Deleting them by hand breaks the
// next run's link for ever, exactly as an attacker's deletion does; prune
// verifies the files, writes a receipt chain (keyed with the log's key)
// that records where the removed runs ended, and only then removes them.
// verify, given the receipt in their place, accepts the link.
//
// The operator names the first file kept (--keep): the run it begins must
// follow the last run removed, so the receipt covers exactly the runs
// before it, never one that rode along in a file being pruned.
func runAuditPrune(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("audit prune", "usage: egressd audit prune --key FILE [--checkpoints FILE] --receipt NEWFILE --keep NEXTFILE FILE...\n\n"+
		"Removes the given audit files, oldest first (whole runs, e.g. egressd run's oldest ID.PID.log files), after verifying them,\n"+
		"and writes NEWFILE, a receipt verify accepts in their place: give it before the files that follow.\n"+
		"NEXTFILE is the first file kept: the run it begins must follow the last run removed. Prune prints each run it removes.\n"+
		"A file a running egressd holds is refused; a run that crashed (no process holds its file) is removed only with --checkpoints\n"+
		"that prove its end (a cut-back clean run reads like a crash), and the receipt records the crash.\n"+
		"Only a keyed log is pruned, with its key (across a change of key, every key, oldest first); the receipt is keyed with the key of NEXTFILE's run. Exit 0 pruned, 1 refused.", stderr)
	keyFiles := keyFlag(fs, "the HMAC key file of a keyed chain (the receipt is keyed with the key of the file kept)")
	receipt := fs.String("receipt", "", "the receipt file to create (it must not exist)")
	keep := fs.String("keep", "", "the first file kept, whose run follows the last run removed (it is not changed)")
	ckpt := fs.String("checkpoints", "", "the checkpoints (e.g. the journal) to cross-check the runs removed against: a run cut back before prune is refused")
	files, err := parseFilesAnywhere(fs, args)
	if err != nil || len(files) == 0 || *receipt == "" || *keep == "" {
		if err == nil {
			fs.Usage()
		}
		if err == nil && *keep == "" {
			fmt.Fprintln(stderr, "egressd audit prune: --keep is missing: name the first file that stays (the next run's), so the receipt covers exactly the runs before it")
		}
		return exitUsage
	}
	if err := prune(files, *keep, *keyFiles, *ckpt, *receipt, stdout); err != nil {
		fmt.Fprintln(stderr, "egressd audit prune:", termsafe.String(err.Error()))
		return exitFail
	}
	return exitOK
}

func prune(files []string, keep string, keyFiles []string, ckptFile, receipt string, stdout io.Writer) error {
	opts, _, err := verifyOptions(keyFiles, ckptFile)
	if err != nil {
		return err
	}
	opts.Keep = keep
	if _, err := os.Lstat(receipt); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s exists: name a new file for the receipt", receipt)
	}
	// Holding each file's audit lock proves no process writes it: a run
	// without its shutdown record is then over (it crashed), never a run
	// still writing, and nothing is appended until the files are removed.
	held, err := audit.Hold(files)
	if err != nil {
		return fmt.Errorf("%w; nothing removed", err)
	}
	defer held.Release()
	opts.NoWriter = true
	v, err := audit.Verify(files, opts)
	pruneVerified(files)
	switch {
	case err != nil:
		return err
	case len(v.Chains) > 0 && !v.Keyed:
		return errors.New("the log is not keyed: whoever can delete its files could write a receipt for them too, so verify takes only a keyed receipt; keep unkeyed logs whole, or key the log (audit.key_file) from now on; nothing removed")
	case opts.Key == nil:
		return fmt.Errorf("the log is keyed (key id %s): pass --key, so the receipt is keyed too; nothing removed", v.KeyID)
	case !v.Intact && !v.CrashesOnly:
		return fmt.Errorf("the files do not verify (%s); nothing removed", v.Problem)
	case len(v.Chains) == 0:
		return errors.New("the files hold no run; nothing removed")
	case !v.Chains[0].NamesRunBefore():
		// The receipt starts prev_run=none: pruning this run alone would
		// turn "the run before it is not proven" into a proven first run,
		// and the run before it could then be deleted without a trace.
		c := v.Chains[0]
		return fmt.Errorf("run %s (%s) does not name the run before it (prev_run %s: it started while another run ran, or after a crash): prune it together with the file of the run before it; nothing removed", c.ID, c.File, orNone(c.PrevRun))
	}
	if err := audit.CrashesProven(v, ckptFile != ""); err != nil {
		return fmt.Errorf("%w; nothing removed", err)
	}
	// The receipt's end is the hash verify checked, from the one read of
	// each file: reading the last file again by name would take whatever
	// was appended to it since.
	through := v.Chains[len(v.Chains)-1].Hash
	if err := held.StillNamed(); err != nil {
		return fmt.Errorf("%w; nothing removed", err)
	}
	f, err := audit.OpenFile(receipt, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// The receipt is keyed with the key of the run kept after it: verify
	// takes a receipt only with the key of the run that follows it, so a
	// retired key cannot vouch for the removal of runs written after it.
	if v.KeepKey < 1 {
		return errors.New("no key given verifies the file to keep; nothing removed")
	}
	key := append([][]byte{opts.Key}, opts.OtherKeys...)[v.KeepKey-1]
	log, err := audit.New(f, audit.Options{Key: key, KeyID: v.KeepKeyID, Integration: v.OneIntegration()})
	if err != nil {
		return err
	}
	for _, ev := range audit.PruneEvents(through, v.Lines, v) {
		if err := log.Write(ev); err != nil {
			return err
		}
	}
	if err := log.Close(); err != nil {
		return err
	}
	for _, c := range v.Chains {
		crash := ""
		if c.End == "crashed" {
			crash = fmt.Sprintf(" (crashed at seq %d: the receipt records it)", c.Last)
		}
		what := "run"
		if c.Receipt {
			what = "earlier receipt" // no run: its runs are counted by what it lists
		}
		printLine(stdout, "%s %s (%s): %s to %s, %d lines%s", what, c.ID, c.File, c.FirstTime, c.LastTime, c.Lines, crash)
	}
	if err := held.Remove(func(name string) { printLine(stdout, "removed %s", name) }); err != nil {
		return fmt.Errorf("receipt %s written, but %w: remove the rest by hand", receipt, err)
	}
	printLine(stdout, "receipt %s: %d run(s), %d lines, ending in hash %s; %d run(s) removed in all, with those of the earlier receipts; give it to audit verify in their place, before the files that follow",
		receipt, len(v.Runs()), v.Lines, through, v.PrunedRunsInAll())
	return nil
}

// pruneVerified is called once the files are verified, before the receipt
// is built: a test appends to a file there, as an attacker racing prune
// would, to prove the receipt is built from what was verified.
var pruneVerified = func(files []string) {}
