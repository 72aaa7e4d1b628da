package audit

import (
	"fmt"
	"strconv"
	"strings"
)

// Pruned is the lifecycle action of a prune receipt: "egressd audit prune"
// removed whole runs' files, and a chain of its own (keyed like them)
// records what they were. verify, given the receipt where the runs were,
// accepts that the next run follows them; deleting a file without a
// receipt still breaks the link, and a receipt cannot be forged for a keyed
// log without its key.
const Pruned = "pruned"

// PruneMessage is a receipt's message: the hash of the last line of the
// last run removed (the next run's prev_run), how many runs and lines, and
// each removed chain with its last seq (so their checkpoints are judged).
func PruneMessage(through string, lines int, chains []ChainVerdict) string {
	parts := make([]string, len(chains))
	for i, c := range chains {
		parts[i] = c.ID + ":" + strconv.FormatUint(c.Last, 10)
	}
	return fmt.Sprintf("through=%s runs=%d lines=%d chains=%s", through, len(chains), lines, strings.Join(parts, ","))
}

// pruneReceipt is what verify read from a receipt.
type pruneReceipt struct {
	chain, through string
	runs           string
}

// readPruned records the receipt in f, read in a verified chain.
func (v *verifier) readPruned(f lineFields) {
	r := pruneReceipt{chain: v.cur.ID, through: msgField(f.Msg, "through"), runs: msgField(f.Msg, "runs")}
	if !isHexHash(r.through) {
		v.fail(v.lastFile, f.Seq, "a prune receipt that does not name the last hash of the runs it removed")
		return
	}
	for _, c := range strings.Split(msgField(f.Msg, "chains"), ",") {
		id, last, ok := strings.Cut(c, ":")
		n, err := strconv.ParseUint(last, 10, 64)
		if ok && err == nil && id != "" {
			v.prunedChains[id] = n
		}
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
	v.receipt = nil
	v.out.Notes = append(v.out.Notes, fmt.Sprintf("chain %s (%s) follows %s run(s) the operator removed with egressd audit prune (receipt chain %s): their lines are gone; the receipt records where they ended", id, file, r.runs, r.chain))
	return true
}
