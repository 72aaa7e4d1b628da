package audit

import (
	"fmt"
	"slices"
)

// lastRunLinked checks the files' runs against the link file egressd run
// keeps beside them (VerifyOptions.RunLink, STATE/audit/ID.lastrun): the
// run it names as the last must be in the files. Without it, deleting the
// newest run's whole file left the others verifying as intact, since
// nothing after that run names it; the link file does. Rewriting the link
// file too stays possible for whoever can write the state folder, which
// only checkpoints rule out (and the README says so).
func (v *verifier) lastRunLinked(path string) {
	hash, open := parseRunLink(path)
	var runs []ChainVerdict
	for _, c := range v.out.Chains {
		if !c.Receipt {
			runs = append(runs, c)
		}
	}
	if len(runs) == 0 {
		return
	}
	last := runs[len(runs)-1]
	switch {
	case hash == "none":
		v.fail(last.File, last.Last, fmt.Sprintf("%s, the link file egressd run writes at each run's start and end, is missing although runs wrote files here: it was deleted, and with it the record of which run was the newest (runs written before egressd kept the file: verify them by name, without --run-files)", path))
	case hash == Unreadable:
		v.fail(last.File, last.Last, fmt.Sprintf("%s, the link file egressd run writes at each run's start and end, holds something egressd did not write: it was rewritten", path))
	case open != "":
		if !slices.ContainsFunc(runs, func(c ChainVerdict) bool { return c.ID == open }) {
			v.fail(last.File, last.Last, fmt.Sprintf("%s says run %s started last, and no file here holds it: the newest run's file was removed", path, open))
		}
	default:
		if !slices.ContainsFunc(runs, func(c ChainVerdict) bool { return c.End == "shutdown" && c.Hash == hash }) {
			v.fail(last.File, last.Last, fmt.Sprintf("%s says the last run closed with the line of hash %s, and no run here ends with it: the newest run's file was removed", path, hash))
		}
	}
}
