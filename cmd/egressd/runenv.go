package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/sandbox"
)

// maxHeldBackLines bounds the warnings one run writes about held-back keys.
const maxHeldBackLines = 32

// envReport is what "egressd run" says about the program's environment:
// the declared keys it held back, and the names of the launcher variables
// that crossed. Never a value.
type envReport struct {
	heldBack []string // "NAME: why"
	carriers []string // "NAME holds the value of the bound secret S": never passed
	crossed  []string
}

func newEnvReport(launcher, declared, passthrough []string) envReport {
	named := map[string]bool{}
	for _, k := range passthrough {
		named[k] = true
	}
	var r envReport
	for _, k := range declared {
		if why := sandbox.HeldBack(k); why != "" && !named[k] {
			r.heldBack = append(r.heldBack, k+": "+why)
		}
	}
	r.crossed = sandbox.Crossed(launcher, declared, passthrough)
	return r
}

// report warns about each held-back key on stderr and in the audit log, and
// records the crossed names at start.
func (r envReport) report(stderr io.Writer, log *audit.Log, p *policy.Policy) {
	held := r.heldBack
	if len(held) > maxHeldBackLines { // the manifest chooses how many keys it declares
		rest := fmt.Sprintf("and %d more declared keys held back", len(held)-maxHeldBackLines)
		fmt.Fprintln(stderr, "egressd: warning:", rest)
		log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "env_held_back", Msg: rest}))
		held = held[:maxHeldBackLines]
	}
	for _, h := range held {
		name, _, _ := strings.Cut(h, ":")
		msg := fmt.Sprintf("the manifest declares %s; not passed (pass --env %s or list it in env_passthrough to allow it)", h, name)
		fmt.Fprintln(stderr, "egressd: warning:", msg)
		log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "env_held_back", Msg: msg}))
	}
	for _, c := range r.carriers {
		msg := c + ": not passed into the sandbox, whatever the manifest declares"
		fmt.Fprintln(stderr, "egressd: warning:", msg)
		log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "env_held_back", Msg: msg}))
	}
	log.Write(p.Identify(audit.Event{Kind: audit.Lifecycle, Action: "env", Msg: "crossed: " + strings.Join(r.crossed, ",")}))
}
