package main

import (
	"fmt"
	"io"

	"github.com/egressd/egressd/policy"
)

func runApprove(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("approve", "usage: egressd approve [--state DIR] ID VERSION\n\nApproves a manifest version whose network list adds entries. A running\n\"egressd serve\" applies it on its next reload (SIGHUP).", stderr)
	state := fs.String("state", policy.DefaultStateDir(), "version memory directory")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return exitUsage
	}
	mem, err := policy.OpenMemory(*state)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitFail
	}
	id, version := fs.Arg(0), fs.Arg(1)
	if err := mem.Approve(id, version); err != nil {
		fmt.Fprintln(stderr, err)
		return exitFail
	}
	fmt.Fprintf(stdout, "approved %s %s in %s; reload egressd (SIGHUP) to apply it\n", id, version, *state)
	return exitOK
}
