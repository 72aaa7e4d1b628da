package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// CheckpointRecord is one checkpoint line.
type CheckpointRecord struct {
	Chain string `json:"chain"`
	Seq   uint64 `json:"seq"`
	Hash  string `json:"hash"`
	// Integration is the stem of the run's files the chain was written
	// for (egressd run's ID, Options.Integration); "" in checkpoints of
	// serve and of egressd before it named them.
	Integration string `json:"integration,omitempty"`
}

// readCheckpoints indexes cs by chain and seq. Nothing authenticates a
// checkpoint line: egressd run's stderr carries the program's output too,
// and a program can print a line shaped like a checkpoint. Two checkpoints
// that name different hashes for one chain and seq are therefore a
// failure, never one taking the other's place: a forged checkpoint printed
// after egressd's must not replace it and make a rewritten log agree.
func (v *verifier) readCheckpoints(cs []CheckpointRecord) {
	for _, c := range cs {
		if v.checkpoints[c.Chain] == nil {
			v.checkpoints[c.Chain] = map[uint64]string{}
		}
		if had, ok := v.checkpoints[c.Chain][c.Seq]; ok && had != c.Hash {
			v.fail("checkpoints", c.Seq, fmt.Sprintf("two checkpoints of chain %s name different hashes for this seq (%s and %s): one of them was not written by egressd (a program whose output shares egressd's stderr can print a line shaped like a checkpoint), so the log cannot be cross-checked against them", c.Chain, had, c.Hash))
			continue
		}
		v.checkpoints[c.Chain][c.Seq] = c.Hash
		if v.checkpointNames[c.Chain] == nil {
			v.checkpointNames[c.Chain] = map[string]bool{}
		}
		v.checkpointNames[c.Chain][c.Integration] = true
	}
}

// everyChainCovered holds every chain of the files to the checkpoints
// given, once they hold any chain's own: a chain must have checkpoints of
// its own, or be named by the run after it (its prev_run is the hash of
// the chain's last line) when that run is covered, since rewriting the
// chain would change the hash that run's checkpoints vouch for. Anything
// else was added whole, for all the checkpoints can tell: round 52 put a
// forged first run before an integration's real ones (unkeyed and
// recomputed, or keyed with a retired key) and verify said intact, its
// only trace a note. A prune receipt is checked with its key instead.
func (v *verifier) everyChainCovered() {
	chains := v.out.Chains
	given := false
	for _, c := range chains {
		given = given || len(v.checkpoints[c.ID]) > 0
	}
	if !given {
		// Checkpoints given, none of them of a chain here: they vouch for
		// nothing, and a log whose every run was replaced by runs that
		// name another integration set them all aside as another's
		// (round 53).
		pruned := false // checkpoints of runs a receipt here removed are matched by it
		for id := range v.checkpoints {
			_, was := v.prunedChains[id]
			pruned = pruned || was
		}
		if len(v.checkpoints) > 0 && len(chains) > 0 && !pruned {
			v.fail(chains[0].File, chains[0].First, fmt.Sprintf("none of the checkpoints given is of a chain in these files (%d chain(s), the first %s): they cross-check nothing, so the runs here may have been replaced whole; give the checkpoints these runs wrote", len(chains), chains[0].ID))
		}
		return
	}
	covered := make([]bool, len(chains))
	for i := len(chains) - 1; i >= 0; i-- {
		c := chains[i]
		switch {
		case len(v.checkpoints[c.ID]) > 0 || c.Receipt:
			covered[i] = true
		case i+1 < len(chains) && covered[i+1] && v.linkedBy[c.ID]:
			covered[i] = true
			v.out.Notes = append(v.out.Notes, fmt.Sprintf("chain %s (%d lines) has no checkpoint in those given; the run after it names its end, and is covered, so it is proven through that run", c.ID, c.Lines))
		}
	}
	for i, c := range chains {
		if !covered[i] {
			v.fail(c.File, c.First, fmt.Sprintf("chain %s (%d lines) has no checkpoint in those given, and no run after it that the checkpoints cover names its end: the run was added whole (or its checkpoints are not in those given: give checkpoints that hold its own, or verify the files without it)", c.ID, c.Lines))
			return
		}
	}
}

// unmatchedCheckpoints fails on a checkpoint past the end of its chain (the
// log was cut back, and its end forged) or for a chain the files do not
// hold (the chain was replaced, or its files were not given).
func (v *verifier) unmatchedCheckpoints() {
	last := map[string]uint64{}
	for _, c := range v.out.Chains {
		last[c.ID] = c.Last
	}
	v.prunedButPresent()
	if n := len(v.opts.UnreadCheckpoints); n > 0 {
		v.out.Notes = append(v.out.Notes, fmt.Sprintf("%d line(s) of the checkpoints file name a checkpoint but do not parse as one (line %s): they were not cross-checked; give the checkpoints as egressd wrote them (journalctl -o cat or the default short format)", n, lineList(v.opts.UnreadCheckpoints)))
	}
	ids := make([]string, 0, len(v.checkpoints))
	for id := range v.checkpoints {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	others := map[string]int{}
	for _, id := range ids {
		var top uint64
		for seq := range v.checkpoints[id] {
			top = max(top, seq)
		}
		end, ok := last[id]
		pruned, wasPruned := v.prunedChains[id]
		switch {
		case !ok && wasPruned && top > pruned:
			v.fail(v.lastFile, top, fmt.Sprintf("a checkpoint of chain %s names seq %d but the prune receipt says it ended at seq %d: the run was cut back before it was pruned", id, top, pruned))
		case !ok && wasPruned:
			v.out.Notes = append(v.out.Notes, fmt.Sprintf("%d checkpoint(s) of chain %s were not cross-checked: a prune receipt says its run was removed", len(v.checkpoints[id]), id))
		case !ok && v.opts.Keep != "" && v.ofOtherIntegration(id):
			others[v.onlyName(id)] += len(v.checkpoints[id])
		case !ok && v.opts.Keep != "":
			// Prune verifies only the runs before the file kept: the
			// checkpoints of the runs kept after it are not theirs to
			// match. A chain whose checkpoints begin before the kept run's
			// started before it, and is in none of the files to prune: a
			// run removed by hand, which prune must not launder into a
			// receipt (round 20).
			if keep, at := v.firstCheckpoint(v.keepChain), v.firstCheckpoint(id); keep < 0 || at < keep {
				v.fail(v.lastFile, top, fmt.Sprintf("%d checkpoint(s) of chain %s match none of the files to prune, and the checkpoints given do not show it started after the run kept (chain %s): a run before the one kept is missing from the files, or the checkpoints hold none of the kept run's", len(v.checkpoints[id]), id, v.keepChain))
			}
		case !ok && v.ofOtherIntegration(id):
			others[v.onlyName(id)] += len(v.checkpoints[id])
		case !ok:
			v.fail(v.lastFile, top, fmt.Sprintf("%d checkpoint(s) of chain %s (the last at seq %d) match no chain in the files given: that chain was replaced or removed, or its files were not given", len(v.checkpoints[id]), id, top))
		case top > end:
			v.fail(v.lastFile, top, fmt.Sprintf("a checkpoint of chain %s names seq %d but the chain ends at seq %d: the log was cut back (rolled back) after the checkpoint was written", id, top, end))
		}
	}
	if len(others) > 0 {
		n, names := 0, make([]string, 0, len(others))
		for name, k := range others {
			n += k
			names = append(names, name)
		}
		sort.Strings(names)
		v.out.Notes = append(v.out.Notes, fmt.Sprintf("%d checkpoint(s) of other integrations (%s) ignored: they name runs of files not given", n, strings.Join(names, ", ")))
	}
	v.everyChainCovered()
}

// prunedButPresent fails on a chain the files hold that a receipt among
// them lists as removed, whatever their order: a copy of a pruned run put
// back (before the receipt too: round 22), whose own checkpoints would
// otherwise vouch for it.
func (v *verifier) prunedButPresent() {
	for _, c := range v.out.Chains {
		if _, pruned := v.prunedChains[c.ID]; pruned {
			v.fail(c.File, 1, fmt.Sprintf("chain %s was removed by egressd audit prune (a receipt given lists it), yet its file is here: a copy of a pruned run was put back", c.ID))
			return
		}
	}
}

// firstCheckpoint is the position, in the checkpoints given (the journal's
// order, which is time's), of chain id's first checkpoint, or -1.
func (v *verifier) firstCheckpoint(id string) int {
	for i, c := range v.opts.Checkpoints {
		if c.Chain == id {
			return i
		}
	}
	return -1
}

// ofOtherIntegration reports whether the checkpoints of chain id, which
// no file given holds, were all written for runs of another integration
// than every chain in the files: one journal holds the checkpoints of
// every id on the host, and verifying one id's files must not fail on
// another's. It is never so when a chain in the files names no
// integration (an older log, or serve's), nor when any of its
// checkpoints names none or names one of the files' integrations: a
// deleted run of the files' own integration still fails.
func (v *verifier) ofOtherIntegration(id string) bool {
	names := v.checkpointNames[id]
	if len(names) != 1 || names[""] || len(v.out.Chains) == 0 {
		return false
	}
	for _, c := range v.out.Chains {
		if c.Integration == "" || names[c.Integration] {
			return false
		}
	}
	return true
}

// onlyName is the one integration chain id's checkpoints name.
func (v *verifier) onlyName(id string) string {
	for n := range v.checkpointNames[id] {
		return n
	}
	return ""
}

// CheckpointLines is what ReadCheckpoints found in a file of checkpoint
// lines.
type CheckpointLines struct {
	Records []CheckpointRecord
	// Unread are the numbers of lines that name a checkpoint but do not
	// parse as one: a checkpoint verify could not read proves nothing, and
	// the operator must hear that it was not cross-checked.
	Unread []int
}

// checkpointStart begins egressd's checkpoint object; checkpointMention is
// how a line that holds one in any form names it (JSON, or JSON quoted
// inside JSON as journalctl -o json prints it).
var (
	checkpointStart   = []byte(`{"event":"checkpoint"`)
	checkpointMention = regexp.MustCompile(`checkpoint\\?"`)
)

// ReadCheckpoints reads checkpoint lines from r, ignoring every line that
// does not name one, so a whole stderr capture or journal can be given. A
// checkpoint is found anywhere in its line: journalctl prefixes each line
// ("Dec 01 05:16:58 host egressd[42]: {…}"), and a capturing pipeline may
// too. It is the last JSON object in the line from {"event":"checkpoint"
// to the line's end, parsed strictly: exactly egressd's four keys, a chain
// id and a 64-digit hex hash. A line that names a checkpoint otherwise is
// Unread.
//
// Lines may be of any length: a sandboxed program that writes to stderr
// without a newline puts egressd's next checkpoint at the end of its line.
// Memory stays bounded: of a line longer than the read buffer only its
// last checkpointWindow bytes are kept, where a checkpoint ends, and
// whether any part of it names a checkpoint.
func ReadCheckpoints(r io.Reader) (CheckpointLines, error) {
	var out CheckpointLines
	br := bufio.NewReaderSize(r, 64<<10)
	var long longLine
	for n := 0; ; {
		chunk, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long.add(chunk)
			continue
		}
		n++ // the line ends here
		line, mentioned := chunk, checkpointMention.Match(chunk)
		if long.started() {
			long.add(chunk)
			line, mentioned = long.tail, long.mentioned
			long = longLine{}
		}
		if mentioned {
			if c, ok := parseCheckpoint(line); ok {
				out.Records = append(out.Records, c)
			} else {
				out.Unread = append(out.Unread, n)
			}
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// checkpointWindow is how much of the end of a long line is kept: far
// more than a checkpoint object egressd writes (about 150 bytes).
const checkpointWindow = 4 << 10

// longLine is what ReadCheckpoints keeps of a line longer than its buffer:
// its tail, and whether any part named a checkpoint (a mention split
// between two chunks included).
type longLine struct {
	tail      []byte
	mentioned bool
}

func (l *longLine) started() bool { return l.tail != nil }

// add appends the next chunk of the line.
func (l *longLine) add(chunk []byte) {
	joined := make([]byte, 0, len(l.tail)+len(chunk))
	joined = append(append(joined, l.tail...), chunk...)
	l.mentioned = l.mentioned || checkpointMention.Match(joined)
	l.tail = joined[max(0, len(joined)-checkpointWindow):]
}

// parseCheckpoint reads the checkpoint object in line, if it holds one.
func parseCheckpoint(line []byte) (CheckpointRecord, bool) {
	i := bytes.LastIndex(line, checkpointStart) // egressd's ends the line: an earlier one is the program's
	if i < 0 {
		return CheckpointRecord{}, false
	}
	var c struct {
		Event string `json:"event"`
		CheckpointRecord
	}
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimRight(line[i:], "\r\n")))
	dec.DisallowUnknownFields()
	if dec.Decode(&c) != nil || dec.More() || c.Event != string(Checkpoint) || c.Chain == "" || !isHexHash(c.Hash) {
		return CheckpointRecord{}, false
	}
	if _, err := dec.Token(); err != io.EOF { // nothing may follow the object
		return CheckpointRecord{}, false
	}
	return c.CheckpointRecord, true
}

// lineList names up to five line numbers.
func lineList(ns []int) string {
	var parts []string
	for i, n := range ns {
		if i == 5 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprint(n))
	}
	return strings.Join(parts, ", ")
}

func isHexHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for _, r := range h {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}
