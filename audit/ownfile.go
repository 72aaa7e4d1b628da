package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
)

// OwnFile is the genesis field value (file=own) of a run written to a new
// file of its own (egressd run's ID.PID.log). Verify then accepts no other
// chain in that file. Without it, several chains in one file are a writer
// restarted on the same path; but a file of one run that holds another
// was appended to by someone else, and would carry that run along when
// the operator prunes the file (a receipt covering a run nobody meant to
// remove, whose own file the attacker then deletes). The field is under
// the chain's hash, so without the key it can be neither added nor removed.
const OwnFile = "own"

// aloneInOwnFile checks a new chain against the file it starts in: no run
// is seen twice (a copy), and a run that claims its file alone shares it
// with no other, before or after it.
func (v *verifier) aloneInOwnFile(file string, seq uint64, id string, own bool) bool {
	if first, seen := v.began[id]; seen {
		v.fail(file, seq, fmt.Sprintf("chain %s begins again here, after it began in %s: one of them is a copy of the run", id, first))
		return false
	}
	if len(v.out.Chains) == 0 || v.lastChainFile != file {
		return true
	}
	before := v.out.Chains[len(v.out.Chains)-1]
	switch {
	case before.OwnFile:
		v.fail(file, seq, fmt.Sprintf("chain %s was appended to the file of run %s, which egressd wrote for that run alone: another run's lines were copied into it (its own file may have been deleted)", id, before.ID))
	case own:
		v.fail(file, seq, fmt.Sprintf("chain %s was written to a file of its own, yet follows run %s in it: its lines were copied here", id, before.ID))
	}
	return v.out.Problem == ""
}

// keptAfter checks the file egressd audit prune keeps: its first line must
// be the genesis of a new run, not one in the files to prune, checked with
// the key, whose prev_run names the last line of the last run to prune.
// So the runs pruned are exactly those before the run kept: a run that
// rode along in a file to prune, or a file to prune that is a copy, does
// not end where the kept run says the run before it ended. Only the first
// line is read: the kept run may still be writing.
func (v *verifier) keptAfter(name string) error {
	fh, err := openLog(name)
	if err != nil {
		return err
	}
	defer fh.Close()
	line, err := bufio.NewReaderSize(fh, maxLine).ReadSlice('\n')
	var f lineFields
	switch {
	case err != nil:
		v.fail(name, 1, "the file to keep does not begin with a whole audit line")
		return nil
	case json.Unmarshal(line, &f) != nil || f.Prev == nil || len(line) < hashTail+1 || !bytes.HasPrefix(line[len(line)-1-hashTail:], []byte(`,"hash":"`)):
		v.fail(name, 1, "the file to keep does not begin with a chained audit line")
		return nil
	}
	id, keyID, prevRun := msgField(f.Msg, "chain"), msgField(f.Msg, "key_id"), msgField(f.Msg, "prev_run")
	v.keepChain = id
	if len(v.out.Chains) == 0 {
		v.fail(name, f.Seq, "no run to prune comes before the file to keep")
		return nil
	}
	last := v.out.Chains[len(v.out.Chains)-1]
	switch {
	case f.Event != string(Lifecycle) || f.Action != "genesis" || *f.Prev != "" || f.Seq != 1:
		v.fail(name, f.Seq, "the file to keep does not begin a run: give the file of the run that follows the last one pruned")
	case keyID == "" || keyID == "none":
		v.fail(name, f.Seq, fmt.Sprintf("chain %s, which the file to keep begins, is not keyed: that it follows the runs pruned cannot be proven", id))
	case !v.keyVerifies(line[:len(line)-1], f.Hash, keyID):
		v.fail(name, f.Seq, fmt.Sprintf("the genesis of chain %s, which the file to keep begins, does not match its hash with the key given, or with a key no older than the runs pruned", id))
	case !v.aloneInOwnFile(name, f.Seq, id, false):
	case !isHexHash(prevRun) && prevRun == "unknown" && msgField(f.Msg, "prev_open") == last.ID:
		// The run kept started while the last run pruned was open (it
		// crashed): it names that run, not its end.
	case !isHexHash(prevRun):
		v.fail(name, f.Seq, fmt.Sprintf("chain %s, which the file to keep begins, does not name the run before it (prev_run %s): that it follows the runs pruned cannot be proven; keep the file of a later run that does", id, orNone(prevRun)))
	case prevRun != last.Hash:
		v.fail(name, f.Seq, fmt.Sprintf("chain %s, which the file to keep begins, follows a run ending in hash %s, but the last run to prune (chain %s) ends in %s: the files to prune are not exactly the runs before it (a run between them is missing, or a file to prune holds a copy)", id, prevRun, last.ID, last.Hash))
	}
	return nil
}

// keyVerifies reports whether the keyed genesis of the file to keep was
// made with one of the keys given, no older than the runs pruned (it may
// begin a run written after a change of key), and notes that key: the
// receipt is keyed with it (Verdict.KeepKey), so that verify can require
// a receipt's key to be that of the run after it.
func (v *verifier) keyVerifies(line []byte, hash, keyID string) bool {
	for i, k := range v.keys {
		if i >= v.newestKey && hashedWith(k, line, hash) {
			v.out.KeepKey, v.out.KeepKeyID = i+1, keyID
			return true
		}
	}
	return len(v.keys) == 0
}
