package audit

import (
	"fmt"
	"strconv"
)

// Pruned is the lifecycle action of a prune receipt: "egressd audit prune"
// removed whole runs' files, and a chain of its own (keyed like them)
// records what they were. verify, given the receipt where the runs were,
// accepts that the next run follows them; deleting a file without a
// receipt still breaks the link, and a receipt cannot be forged for a keyed
// log without its key. PrunedChain events, one per removed chain, come
// first (so their checkpoints are judged), each within the field caps.
const (
	Pruned      = "pruned"
	PrunedChain = "pruned_chain"
)

// PruneEvents are a receipt's events: one per removed chain (its id and
// last seq; for a run that crashed, end=crashed and the hash of its last
// line, so the crash stays on record; for an earlier receipt removed with
// the runs, receipt=yes, since it is no run), then the receipt itself: the
// hash of the last line of the last run removed (the next run's prev_run),
// how many runs in all (those carried included) and lines. Chains a
// receipt being pruned again listed are carried forward, receipts too (a
// copy of one put back is still caught). The last chain listed is the
// last run removed: a run after a crash names it as prev_open.
func PruneEvents(through string, lines int, v Verdict) []Event {
	var out []Event
	chains := append(append(append([]ChainVerdict{}, v.PrunedReceipts...), v.PrunedChains...), v.Chains...)
	for _, c := range chains {
		msg := fmt.Sprintf("chain=%s last=%d", c.ID, c.Last)
		if c.End == "crashed" {
			msg += " end=crashed hash=" + c.Hash
		}
		if c.Receipt {
			msg += " receipt=yes"
		}
		out = append(out, Event{Kind: Lifecycle, Action: PrunedChain, Msg: msg})
	}
	return append(out, Event{Kind: Lifecycle, Action: Pruned, Msg: fmt.Sprintf("through=%s runs=%d lines=%d", through, v.PrunedRunsInAll(), lines)})
}

// Runs are the chains verified that are runs, not prune receipts.
func (v Verdict) Runs() []ChainVerdict {
	var runs []ChainVerdict
	for _, c := range v.Chains {
		if !c.Receipt {
			runs = append(runs, c)
		}
	}
	return runs
}

// PrunedRunsInAll is how many runs a prune of the files verified removes
// in all: the runs in them, and those their receipts removed before.
func (v Verdict) PrunedRunsInAll() int { return len(v.PrunedChains) + len(v.Runs()) }

// pruneReceipt is what verify read from a receipt.
type pruneReceipt struct {
	chain, through string
	runs           string
	// last is the last chain it lists: the last run removed.
	last string
}

// readPruned records the receipt event in f, read in a verified chain.
//
// Only a keyed receipt, checked with the key, counts: whoever can delete
// an unkeyed log's files can write an unkeyed receipt for them too, and
// it would silence the checkpoints that still catch such a deletion.
func (v *verifier) readPruned(f lineFields) {
	if !v.cur.Keyed || len(v.keys) == 0 {
		v.out.Notes = append(v.out.Notes, fmt.Sprintf("chain %s holds a prune receipt that is not keyed, or was not checked with its key: it is not taken as the operator's, and the runs it names must be given", v.cur.ID))
		return
	}
	if k := v.cur.KeyIndex; k > 0 && k < len(v.keys) {
		// A receipt keyed with a key older than the newest given vouches
		// for nothing once the key changed (round 48: the retired key's
		// holder appended a run under it, then "pruned" every run of the
		// new key before it, their checkpoints skipped). Prune again with
		// the new key to carry an earlier receipt forward.
		v.fail(v.lastFile, f.Seq, fmt.Sprintf("chain %s is a prune receipt keyed with --key #%d, older than the newest key given (#%d): a retired key vouches for no removal; egressd audit prune, run with the new key through the first run written under it, makes a receipt that replaces this one", v.cur.ID, k, len(v.keys)))
		return
	}
	v.cur.Receipt = true
	if f.Action == PrunedChain {
		last, err := strconv.ParseUint(msgField(f.Msg, "last"), 10, 64)
		id := msgField(f.Msg, "chain")
		if id == "" || err != nil {
			return
		}
		if _, listed := v.prunedChains[id]; listed {
			return // two receipts given list it: one run, counted once
		}
		v.prunedChains[id] = last
		if msgField(f.Msg, "receipt") == "yes" {
			v.out.PrunedReceipts = append(v.out.PrunedReceipts, ChainVerdict{ID: id, Last: last, Receipt: true})
			return
		}
		c := ChainVerdict{ID: id, Last: last}
		if msgField(f.Msg, "end") == "crashed" {
			c.End, c.Hash = "crashed", msgField(f.Msg, "hash")
			v.out.Notes = append(v.out.Notes, fmt.Sprintf("run %s crashed at seq %d; pruned by receipt %s (%s): its lines are gone, and whatever it did after seq %d is not in the log", id, last, v.cur.ID, v.lastFile, last))
		}
		v.out.PrunedChains = append(v.out.PrunedChains, c)
		v.lastPruned = id
		return
	}
	r := pruneReceipt{chain: v.cur.ID, through: msgField(f.Msg, "through"), runs: msgField(f.Msg, "runs"), last: v.lastPruned}
	if !isHexHash(r.through) {
		v.fail(v.lastFile, f.Seq, "a prune receipt that does not name the last hash of the runs it removed")
		return
	}
	v.receipt = &r
}

// followsPrune reports whether a chain whose genesis names prevRun follows
// the runs the receipt just read removed, and notes it.
func (v *verifier) followsPrune(id, file, prevRun string) bool {
	r := v.receipt
	if r == nil || prevRun != r.through || len(v.out.Chains) == 0 || v.out.Chains[len(v.out.Chains)-1].ID != r.chain {
		return false
	}
	v.receipt, v.receiptKey = nil, v.out.Chains[len(v.out.Chains)-1].KeyIndex-1
	v.out.Notes = append(v.out.Notes, fmt.Sprintf("chain %s (%s) follows %s run(s) the operator removed with egressd audit prune (receipt chain %s): their lines are gone; the receipt records where they ended", id, file, r.runs, r.chain))
	return true
}

// followsOpenRun checks a new chain whose genesis says prev_open=open: the
// run started last before it had not closed when it started (it crashed,
// or ran alongside), so its end is not named. That run must come right
// before it in the files, or be the last run the prune receipt just read
// removed: otherwise its file was deleted without a receipt, which would
// pass as a boundary merely not linked.
func (v *verifier) followsOpenRun(file string, f lineFields, id, open string) bool {
	n := len(v.out.Chains)
	if n > 0 && v.out.Chains[n-1].ID == open {
		return true
	}
	if r := v.receipt; r != nil && r.last == open && n > 0 && v.out.Chains[n-1].ID == r.chain {
		v.receipt, v.receiptKey = nil, v.out.Chains[n-1].KeyIndex-1
		v.out.Notes = append(v.out.Notes, fmt.Sprintf("chain %s (%s) follows %s run(s) the operator removed with egressd audit prune (receipt chain %s), the last of them run %s, open when it started", id, file, r.runs, r.chain, open))
		return true
	}
	v.fail(file, f.Seq, fmt.Sprintf("chain %s does not name the run before it, only that run %s was open when it started (it crashed, or still ran), and that run is not the one before it in the files given: its file was deleted, or pass the files in the order the runs started (where it was removed with egressd audit prune, give the receipt in its place)", id, open))
	return false
}

// CrashesProven checks that each run in v without a shutdown record is
// proven to have ended where its file ends before prune removes it. A run
// that closed cleanly, cut back at a line boundary by someone without the
// key, reads exactly like a crash: a later run names it only as open when
// it started. Only checkpoints tell them apart: one of the run at or
// before its last line (egressd writes one at every genesis) shows the
// sink covered it, and verify already fails on one past its end (the
// close checkpoint of a clean run cut back).
func CrashesProven(v Verdict, checkpointsGiven bool) error {
	for _, c := range v.Chains {
		if c.End != "crashed" || c.Checkpoints > 0 {
			continue
		}
		if !checkpointsGiven {
			return fmt.Errorf("run %s (%s) has no clean-shutdown record, and without checkpoints a run that crashed cannot be told from one that closed cleanly and was cut back: pass --checkpoints with its checkpoints (the journal of egressd run --config with audit.checkpoints: stderr), or keep its file", c.ID, c.File)
		}
		return fmt.Errorf("run %s (%s) has no clean-shutdown record and no checkpoint in those given: that it crashed there, rather than closed cleanly and was cut back, is not proven; give the checkpoints that cover it, or keep its file", c.ID, c.File)
	}
	return nil
}
