// Command egressd is the one egressd binary. Each subcommand lives in its
// own file and only wires packages together: flags into plain values, plain
// values into constructors.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

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
  egressd explain --manifest PATH [--config FILE] [--state DIR] HOST[:PORT]
                                             show the decision for one target, without resolving it
  egressd run [--manifest PATH | DIR] [flags] [-- COMMAND ARGS...]
                                             run an integration's program sandboxed: the proxy is its only way out
  egressd selftest [--json] [--config FILE] [--mode enforce|audit] [--manifest PATH] [--insecure-env-only]
                                             prove on this host what the sandbox holds: the escape battery
  egressd approve [--state DIR] [--yes] [--folder PLACE] [--digest DIGEST] ID VERSION | --manifest PATH
                                             approve a manifest version that widens its list or changes its id
  egressd state [--state DIR] list | forget ID | forget --folder PATH
                                             show what version memory holds; forget an id, or one folder's record
  egressd audit verify [--key FILE] [--checkpoints FILE] [--files-from LIST|-] [--run-files STATE/audit/ID] [FILE...]
                                             prove an audit log is intact
  egressd audit report [--manifest PATH]... [--key FILE] [--checkpoints FILE] [--format text|json|html] [--files-from LIST|-] [--run-files STATE/audit/ID] [FILE...]
                                             what each integration used, was refused, and does not need
  egressd audit suggest [--format voiceos|sollar] [--integration ID] [--config FILE] [--key FILE] [--checkpoints FILE] [--files-from LIST|-] [--run-files STATE/audit/ID] [--unverified] [FILE...]
                                             the minimal network permission for what a verified log observed
  egressd audit prune --key FILE [--checkpoints FILE] --receipt NEWFILE --keep NEXTFILE FILE...
                                             remove old runs' files, leaving a receipt verify accepts
  egressd version                            print the version

Run "egressd COMMAND --help" (or "egressd help COMMAND") for a command's flags.
Flags may come before or after a command's other arguments; "--" ends them.

exit status: 0 success; 1 the thing checked is bad (a manifest error, a denied
target, a broken log) or egressd could not do its work; 2 usage, or a config
or manifest it cannot load. "egressd run" exits with its program's status.
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
	// The standard logger writes nowhere. egressd's own messages go to
	// stderr and the audit log by their own writers; what reaches the
	// standard logger is net/http's Transport, which has no ErrorLog field
	// and quotes verbatim the bytes a brokered origin sent past its answer
	// ("Unsolicited response ... starting with %q"): the request it echoes,
	// real secret and all. Those bytes are the origin's to choose, so no
	// redaction can be sure of them (TestServeOriginWritingPastItsAnswer...).
	log.SetOutput(io.Discard)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	if cmd == "help" && len(rest) > 0 {
		cmd, rest = rest[0], append(rest[1:], "--help")
	}
	if helpAsked(rest) && knownCommand(cmd) {
		// A command's usage goes to stdout with exit 0 when asked for; the
		// flag package alone would print it to stderr and exit 2.
		dispatch(cmd, helpArgs(cmd, rest), stdout, stdout)
		return exitOK
	}
	return dispatch(cmd, rest, stdout, stderr)
}

// helpAsked reports whether args ask for help: -h, -help or --help before
// a "--" (after which the words are a program's).
func helpAsked(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// helpArgs is what makes cmd print its usage and nothing else: "-h", after
// the audit subcommand if one is named ("audit verify FILE --help").
func helpArgs(cmd string, args []string) []string {
	if cmd == "audit" && len(args) > 0 {
		switch args[0] {
		case "verify", "report", "suggest", "prune":
			return []string{args[0], "-h"}
		}
	}
	return []string{"-h"}
}

// knownCommand reports whether the usage lists cmd: a command added there
// gets --help handling with it.
func knownCommand(cmd string) bool {
	return cmd != "version" && strings.Contains(usage, "\n  egressd "+cmd+" ")
}

// dispatch runs one subcommand.
func dispatch(cmd string, rest []string, stdout, stderr io.Writer) int {
	switch cmd {
	case "check":
		return runCheck(rest, stdout, stderr)
	case "explain":
		return runExplain(rest, stdout, stderr)
	case "approve":
		return runApprove(rest, stdout, stderr)
	case "state":
		return runState(rest, stdout, stderr)
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
