// Command egressd is the one egressd binary. Each subcommand lives in its
// own file and only wires packages together: flags into plain values, plain
// values into constructors.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/egressd/egressd/sandbox"
	"github.com/egressd/egressd/sandbox/selftest"
)

// Exit codes shared by every subcommand.
const (
	exitOK    = 0
	exitFail  = 1 // the thing checked is bad: a manifest error, a denial
	exitUsage = 2
)

const usage = `egressd: a secure egress proxy for integration code

usage:
  egressd serve [flags]                      run the proxy (no flags: the embedded example config)
  egressd check [--json] [--config FILE] PATH...
                                             validate manifests and config files
  egressd explain --manifest PATH [--config FILE] HOST[:PORT]
                                             show the decision for one target, without resolving it
  egressd run [--manifest PATH | DIR] [flags] [-- COMMAND ARGS...]
                                             run an integration's program sandboxed: the proxy is its only way out
  egressd selftest [--json] [--config FILE] [--insecure-env-only]
                                             prove on this host what the sandbox holds: the escape battery
  egressd approve [--state DIR] ID VERSION   approve a manifest version that widens its list
  egressd audit verify [--key FILE] [--checkpoints FILE] FILE...
                                             prove an audit log is intact
  egressd audit report [--manifest PATH]... [--format text|json|html] FILE...
                                             what each integration used, was refused, and does not need
  egressd audit suggest [--format voiceos|sollar] FILE...
                                             the minimal network permission for what was observed
  egressd version                            print the version

Run "egressd COMMAND -h" for a command's flags.
`

func main() {
	// The sandbox's init is this binary re-executed inside the namespaces;
	// it must not go near flag parsing or anything else first.
	if len(os.Args) > 1 && os.Args[1] == sandbox.InitArg {
		os.Exit(sandbox.InitMain())
	}
	if len(os.Args) > 1 && os.Args[1] == selftest.ProbeArg {
		os.Exit(selftest.ProbeMain(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "check":
		return runCheck(rest, stdout, stderr)
	case "explain":
		return runExplain(rest, stdout, stderr)
	case "approve":
		return runApprove(rest, stdout, stderr)
	case "serve":
		return runServe(rest, stdout, stderr)
	case "audit":
		return runAudit(rest, stdout, stderr)
	case "run":
		return runRun(rest, stdout, stderr)
	case "selftest":
		return runSelftest(rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "egressd", Version())
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "egressd: unknown command %q\n\n%s", cmd, usage)
	return exitUsage
}

// newFlagSet is a subcommand's flag set: its errors and usage go to stderr,
// the usage text before the flags.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}
