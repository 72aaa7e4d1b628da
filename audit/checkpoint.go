package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// CheckpointRecord is one checkpoint line.
type CheckpointRecord struct {
	Chain string `json:"chain"`
	Seq   uint64 `json:"seq"`
	Hash  string `json:"hash"`
}

// unmatchedCheckpoints fails on a checkpoint past the end of its chain (the
// log was cut back, and its end forged) or for a chain the files do not
// hold (the chain was replaced, or its files were not given).
func (v *verifier) unmatchedCheckpoints() {
	last := map[string]uint64{}
	for _, c := range v.out.Chains {
		last[c.ID] = c.Last
	}
	if len(v.checkpoints) > 0 {
		for _, c := range v.out.Chains {
			if len(v.checkpoints[c.ID]) == 0 {
				v.out.Notes = append(v.out.Notes, fmt.Sprintf("chain %s (%d lines) has no checkpoint in those given: the checkpoints prove nothing about it (its checkpoints were pruned or off, or the run was added)", c.ID, c.Lines))
			}
		}
	}
	ids := make([]string, 0, len(v.checkpoints))
	for id := range v.checkpoints {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		var top uint64
		for seq := range v.checkpoints[id] {
			top = max(top, seq)
		}
		end, ok := last[id]
		switch {
		case !ok:
			v.fail(v.lastFile, top, fmt.Sprintf("%d checkpoint(s) of chain %s (the last at seq %d) match no chain in the files given: that chain was replaced or removed, or its files were not given", len(v.checkpoints[id]), id, top))
		case top > end:
			v.fail(v.lastFile, top, fmt.Sprintf("a checkpoint of chain %s names seq %d but the chain ends at seq %d: the log was cut back (rolled back) after the checkpoint was written", id, top, end))
		}
	}
}

// ReadCheckpoints reads checkpoint lines (JSON objects with chain, seq and
// hash) from r, ignoring every other line, so a whole stderr capture can be
// given.
func ReadCheckpoints(r io.Reader) ([]CheckpointRecord, error) {
	var out []CheckpointRecord
	br := bufio.NewReaderSize(r, 64<<10)
	long := false // inside a line longer than the buffer: not a checkpoint
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = true
			continue
		}
		if !long {
			var c struct {
				Event string `json:"event"`
				CheckpointRecord
			}
			// A checkpoint line is egressd's own, whole: it begins the line
			// (a message that merely contains one is not a checkpoint).
			if bytes.HasPrefix(line, []byte(`{"event":"checkpoint",`)) && json.Unmarshal(line, &c) == nil && c.Event == string(Checkpoint) && c.Hash != "" {
				out = append(out, c.CheckpointRecord)
			}
		}
		long = false
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}
