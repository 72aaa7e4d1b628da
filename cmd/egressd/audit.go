package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/egressd/egressd/allowlist"
	"github.com/egressd/egressd/audit"
	"github.com/egressd/egressd/internal/safefile"
	"github.com/egressd/egressd/internal/termsafe"
	"github.com/egressd/egressd/policy"
)

const auditUsage = `usage: egressd audit verify|report|suggest|prune [flags] FILE...

  verify   prove an audit log is intact (exit 0 intact, 1 broken)
  report   what each integration used, was refused, and does not need
  suggest  the minimal network permission for what was observed
  prune    remove old runs' files, leaving a receipt verify accepts

Run "egressd audit COMMAND --help" for its flags.`

func runAudit(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, auditUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprintln(stderr, auditUsage) // run() hands stdout here when help is asked for
		return exitUsage
	case "verify":
		return runAuditVerify(args[1:], stdout, stderr)
	case "report":
		return runAuditReport(args[1:], stdout, stderr)
	case "suggest":
		return runAuditSuggest(args[1:], stdout, stderr)
	case "prune":
		return runAuditPrune(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "egressd audit: unknown command %q (verify, report, suggest, prune)\n", args[0])
	return exitUsage
}

func runAuditVerify(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("audit verify", "usage: egressd audit verify [--key FILE] [--checkpoints FILE] [--files-from LIST|-] [--run-files STATE/audit/ID] [FILE...]\n\n"+
		"Checks the hash chain across the files, oldest first: the FILEs, then those listed in LIST, then the run files of ID. Exit 0 intact, 1 broken.", stderr)
	keyFiles := keyFlag(fs, "the HMAC key file of a keyed chain")
	ckptFile := fs.String("checkpoints", "", "a file of checkpoint lines (e.g. egressd's captured stderr) to cross-check")
	fileFlags := addFileFlags(fs)
	named, err := parseFilesAnywhere(fs, args)
	if err != nil || (len(named) == 0 && fileFlags.none()) {
		if err == nil {
			fs.Usage()
		}
		return exitUsage
	}
	files, err := fileFlags.list(named)
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit verify:", termsafe.String(err.Error()))
		return exitUsage
	}
	opts, code, err := verifyOptions(*keyFiles, *ckptFile)
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit verify:", termsafe.String(err.Error()))
		return code
	}
	opts.RunLink = fileFlags.runLink()
	v, err := audit.Verify(files, opts)
	if errors.Is(err, audit.ErrDamagedStream) {
		fmt.Fprintln(stdout, "BROKEN:", termsafe.String(err.Error()))
		return exitFail
	}
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit verify:", termsafe.String(err.Error()))
		return exitUsage
	}
	printVerdict(stdout, v, *keyFiles)
	if v.Intact {
		return exitOK
	}
	return exitFail
}

// logFileFlags are the flags by which verify and report are given their
// files besides naming them: a list (--files-from) and egressd run's files
// of one id (--run-files).
type logFileFlags struct{ filesFrom, runFiles *string }

// addFileFlags defines --files-from and --run-files on fs.
func addFileFlags(fs *flag.FlagSet) logFileFlags {
	return logFileFlags{
		filesFrom: fs.String("files-from", "", "a file (- for stdin) listing the files, one per line, oldest first: never split into two runs as xargs does"),
		runFiles:  fs.String("run-files", "", "STATE/audit/ID: egressd run's files of integration ID there (ID.PID.log and their rotated files, .gz too, not another id's), in the order the runs started"),
	}
}

// runLink is the link file egressd run keeps beside the files of
// --run-files (STATE/audit/ID.lastrun), which names the newest run: ""
// without --run-files.
func (f logFileFlags) runLink() string {
	if *f.runFiles == "" {
		return ""
	}
	return *f.runFiles + ".lastrun"
}

// none reports whether neither flag was given.
func (f logFileFlags) none() bool { return *f.filesFrom == "" && *f.runFiles == "" }

// list is the files to read, in order: those named, then those listed in
// --files-from (- for stdin), then the run files of --run-files
// (STATE/audit/ID). A list given whole is verified in one pass: xargs
// split a long one into two verify runs, and the second failed on honest
// logs (its first run's predecessor was in the first).
func (f logFileFlags) list(named []string) ([]string, error) {
	filesFrom, runFiles := *f.filesFrom, *f.runFiles
	files := append([]string(nil), named...)
	if filesFrom != "" {
		r := os.Stdin
		if filesFrom != "-" {
			f, err := safefile.OpenRegular(filesFrom)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			r = f
		}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 64<<10)
		for sc.Scan() {
			if line := strings.TrimRight(sc.Text(), "\r"); line != "" {
				files = append(files, line)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("--files-from %s: %w", filesFrom, err)
		}
	}
	if runFiles != "" {
		found, err := audit.RunFiles(runFiles)
		if err != nil {
			return nil, fmt.Errorf("--run-files: %w", err)
		}
		files = append(files, found...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no files given")
	}
	return absPaths(files) // --files-from's lines are paths typed like the others
}

// keyFlag defines --key, repeatable: files written across a change of
// key verify with every key they were written with, given oldest first.
func keyFlag(fs *flag.FlagSet, usage string) *multiFlag {
	var keys multiFlag
	fs.Var(&keys, "key", usage+" (repeatable, oldest first: every key the files were written with, across a change of key)")
	return &keys
}

// verifyOptions reads verify's --key and --checkpoints files, and says
// with which exit code to stop if it cannot. A checkpoints file from which
// no checkpoint could be read proves nothing: verify must not then say
// "intact" with 0 checkpoints cross-checked, so it stops with exit 1.
func verifyOptions(keyFiles []string, ckptFile string) (audit.VerifyOptions, int, error) {
	var opts audit.VerifyOptions
	for i, keyFile := range keyFiles {
		key, err := readAuditKey(keyFile)
		if err != nil {
			return opts, exitUsage, err
		}
		if i == 0 {
			opts.Key = key
			continue
		}
		opts.OtherKeys = append(opts.OtherKeys, key)
	}
	if ckptFile != "" {
		f, err := os.Open(ckptFile)
		if err != nil {
			return opts, exitUsage, err
		}
		defer f.Close()
		found, err := audit.ReadCheckpoints(f)
		if err != nil {
			return opts, exitUsage, fmt.Errorf("%s: %w", ckptFile, err)
		}
		if len(found.Records) == 0 {
			why := "no line holds one"
			if len(found.Unread) > 0 {
				why = fmt.Sprintf("%d line(s) name a checkpoint but none parses as one (line %d first)", len(found.Unread), found.Unread[0])
			}
			return opts, exitFail, fmt.Errorf("no checkpoint could be read from %s (%s), so nothing could be cross-checked; give egressd's checkpoint lines, e.g. journalctl -u egressd -o cat", ckptFile, why)
		}
		opts.Checkpoints, opts.UnreadCheckpoints = found.Records, found.Unread
	}
	return opts, exitOK, nil
}

// maxChainsListed bounds the chains printed one per line: a service in a
// restart loop leaves thousands of runs in one file. The last chain, where
// a problem usually is, is always printed.
const maxChainsListed = 20

// printVerdict writes the verdict, one line per chain, and what it proves.
// Chain ids and file names are escaped: a log's bytes are the writer's.
// Each keyed chain names the --key file that verified it: the key id its
// first line names is the writer's word, and says nothing of which key
// checked it (round 51: a chain an older key verified was shown under
// the newer key's id).
func printVerdict(w io.Writer, v audit.Verdict, keyFiles []string) {
	kind := "unkeyed (SHA-256)"
	switch {
	case v.Keyed:
		kind = "keyed (HMAC-SHA-256, key id " + termsafe.String(v.KeyID) + ")"
	case len(v.Chains) == 0:
		// No genesis was read: nothing says whether the log was keyed,
		// and "unkeyed" would tell the reviewer its key is not needed.
		kind = "keyed or not: unknown, no chain's first line was read"
	}
	if v.Intact {
		fmt.Fprintf(w, "intact: %d lines through seq %d in %d chain(s), %s, %d checkpoints cross-checked\n", v.Lines, v.IntactThrough, len(v.Chains), kind, v.Checkpoints)
	} else {
		fmt.Fprintf(w, "BROKEN: %s\nintact through seq %d (%d lines), %s\n", termsafe.String(v.Problem), v.IntactThrough, v.Lines, kind)
	}
	for i, c := range v.Chains {
		if i == maxChainsListed && len(v.Chains) > maxChainsListed+1 {
			fmt.Fprintf(w, "  … and %d more chain(s)\n", len(v.Chains)-i-1)
			c = v.Chains[len(v.Chains)-1]
		} else if i > maxChainsListed {
			break
		}
		end := "closed cleanly"
		switch c.End {
		case "":
			end = "no clean-shutdown record in what was read"
		case "crashed":
			end = "CRASHED: no clean-shutdown record, a new run follows (later runs still verified)"
		case "broken":
			end = "BROKEN here"
		}
		key := "unkeyed"
		if c.Keyed {
			key = "key id " + c.KeyID
			if k := c.KeyIndex; k > 0 && k <= len(keyFiles) {
				key += fmt.Sprintf(" (its first line's word), verified with --key #%d %s", k, keyFiles[k-1])
			}
		}
		fmt.Fprintf(w, "  chain %s: seq %d–%d, %d lines, %s, %s\n", termsafe.String(c.ID), c.First, c.Last, c.Lines, termsafe.String(key), end)
	}
	for _, n := range v.Notes {
		fmt.Fprintf(w, "note: %s\n", termsafe.String(n))
	}
	fmt.Fprintf(w, "proves: %s\n", v.Proves)
}

func runAuditReport(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("audit report", "usage: egressd audit report [--manifest PATH]... [--key FILE] [--checkpoints FILE] [--format text|json|html] [--files-from LIST|-] [--run-files STATE/audit/ID] [FILE...]\n\n"+
		"Verifies the chain first (as audit verify, over the same files in the same order: the FILEs, then those listed in LIST, then the run files of ID):\n"+
		"a log that does not verify is reported under a first line saying so and where, and exits 1.", stderr)
	var manifests multiFlag
	fs.Var(&manifests, "manifest", "an integration's manifest (file or folder), repeatable; default: the paths recorded in the log")
	format := fs.String("format", "text", "text, json or html")
	keyFiles := keyFlag(fs, "the HMAC key file of a keyed chain, to verify it")
	ckptFile := fs.String("checkpoints", "", "a file of checkpoint lines to cross-check, as audit verify")
	fileFlags := addFileFlags(fs)
	given, err := parseFilesAnywhere(fs, args)
	if err != nil || (len(given) == 0 && fileFlags.none()) {
		if err == nil {
			fs.Usage()
		}
		return exitUsage
	}
	files, err := fileFlags.list(given)
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit report:", termsafe.String(err.Error()))
		return exitUsage
	}
	if *format != "text" && *format != "json" && *format != "html" {
		fmt.Fprintf(stderr, "egressd audit report: --format must be text, json or html (%q)\n", *format)
		return exitUsage
	}
	// Verify and read in one linear pass over one open of each file: a
	// reviewer never reads the report of a broken log as the report of a
	// good one, nor the report of other bytes than those verified.
	verdict, recs, code, err := readVerified(files, *keyFiles, *ckptFile, fileFlags.runLink())
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit report:", termsafe.String(err.Error()))
		return code
	}
	// The lists the log records as in force are what its traffic is judged
	// by; a manifest is read only for an id whose events do not record
	// them (a log from an earlier egressd), or when the operator names it.
	recorded := audit.ListsInForce(recs)
	named := len(manifests) > 0
	if !named {
		for _, r := range recs {
			// A claim's manifest is not the owner's: its entries are not
			// the id's declared list.
			if r.Event == string(audit.Policy) && r.Manifest != "" && r.Claim == "" && recorded[r.Integration] == nil && !slices.Contains(manifests, r.Manifest) {
				manifests = append(manifests, r.Manifest)
			}
		}
	}
	// A manifest named judges its own id only: every other id keeps the
	// list its log records (round 42: one --manifest blanked the finding
	// of every other integration in a shared serve log).
	declared := map[string][]string{}
	for id, list := range recorded {
		declared[id] = list
	}
	from := map[string]string{}    // id -> the manifest file its list was read from now
	namedBy := map[string]string{} // id -> the --manifest that declares it
	for _, path := range manifests {
		m, err := loadNamedManifest(path)
		if err != nil || m == nil {
			why := "it has problems (egressd check says which)"
			if err != nil {
				why = err.Error()
			}
			fmt.Fprintf(stderr, "egressd audit report: warning: manifest %s not read (%s); its unused entries are not reported\n", termsafe.String(path), termsafe.String(why))
			continue
		}
		if _, ok := recorded[m.ID]; ok && !named {
			continue // the log records the lists in force for this id
		}
		if named {
			// Two manifests of one id (a folder that claims another's id)
			// would be judged as one list that neither holds.
			if other, dup := namedBy[m.ID]; dup {
				fmt.Fprintf(stderr, "egressd audit report: --manifest %s and --manifest %s both declare %s: the report judges an id by one manifest; name one\n", termsafe.String(other), termsafe.String(path), termsafe.String(m.ID))
				return exitUsage
			}
			namedBy[m.ID] = path
			declared[m.ID] = nil
		}
		for _, e := range m.Entries {
			declared[m.ID] = append(declared[m.ID], e.String())
		}
		from[m.ID] = judgedBy(path, named)
		if declared[m.ID] == nil {
			declared[m.ID] = []string{}
		}
	}
	rep := audit.BuildReport(recs, declared)
	for i, ir := range rep.Integrations {
		if ir.Claim == "" {
			rep.Integrations[i].DeclaredFrom = from[ir.ID]
		}
	}
	rep.Files = files
	rep.Verification = audit.VerificationOf(verdict)
	switch *format {
	case "text":
		err = audit.WriteText(stdout, rep)
	case "json":
		var data []byte
		if data, err = json.MarshalIndent(rep, "", "  "); err == nil {
			_, err = stdout.Write(append(termsafe.JSON(data), '\n')) // a folder's bidi override as \u202e, as the text report escapes it
		}
	case "html":
		err = audit.WriteHTML(stdout, rep)
	default:
		fmt.Fprintf(stderr, "egressd audit report: --format must be text, json or html (%q)\n", *format)
		return exitUsage
	}
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit report:", termsafe.String(err.Error()))
		return exitFail
	}
	if !verdict.Intact {
		fmt.Fprintln(stderr, "egressd audit report:", termsafe.String(rep.Verification.Headline()))
		return exitFail
	}
	return exitOK
}

// judgedBy says where a list read at report time comes from: a manifest
// file as it is now, which may not be the list that was in force.
func judgedBy(path string, named bool) string {
	if named {
		return "the manifest file " + path + " as it is now (named by --manifest), not necessarily the list in force then"
	}
	return "the manifest file " + path + " as it is now, not the list in force then: this log records none (an egressd before the list was recorded)"
}

// loadNamedManifest reads a manifest whose path a log may have chosen: only
// a regular file is read, opened without blocking (a FIFO or a device
// never stalls the report), and at most maxNamedManifest bytes of it.
func loadNamedManifest(path string) (*allowlist.Manifest, error) {
	file, err := allowlist.Locate(path)
	if err != nil {
		return nil, err
	}
	data, err := safefile.ReadRegular(file, maxNamedManifest)
	if err != nil {
		return nil, err
	}
	m, _ := allowlist.Parse(filepath.Base(file), data, nil)
	return m, nil
}

// maxNamedManifest bounds a manifest the report reads, as serve does.
const maxNamedManifest = 1 << 20

func runAuditSuggest(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("audit suggest", "usage: egressd audit suggest [--format voiceos|sollar] [--integration ID] [--config FILE] [--key FILE] [--checkpoints FILE] [--files-from LIST|-] [--run-files STATE/audit/ID] [--unverified] [FILE...]\n\n"+
		"Prints the minimal network permission covering what the log observed. Verifies the chain first (as audit verify, over the same files in the same order):\n"+
		"from a log that does not verify nothing is suggested (one line on stderr says why, exit 1), unless --unverified.", stderr)
	format := fs.String("format", "voiceos", "voiceos (a permissions[] element) or sollar (the network member)")
	integration := fs.String("integration", "", "the integration id, when the log holds several")
	config := fs.String("config", "", "the operator config whose rules (wildcard_dns_services) apply, as check --config applies them")
	keyFiles := keyFlag(fs, "the HMAC key file of a keyed chain, to verify it")
	ckptFile := fs.String("checkpoints", "", "a file of checkpoint lines to cross-check, as audit verify")
	fileFlags := addFileFlags(fs)
	unverified := fs.Bool("unverified", false, "print the suggestion from a log that does not verify, under the LOG NOT VERIFIED banner on stderr (exit 1 still)")
	given, err := parseFilesAnywhere(fs, args)
	if err != nil || (len(given) == 0 && fileFlags.none()) {
		if err == nil {
			fs.Usage()
		}
		return exitUsage
	}
	files, err := fileFlags.list(given)
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit suggest:", termsafe.String(err.Error()))
		return exitUsage
	}
	f := map[string]allowlist.Format{"voiceos": allowlist.VoiceOS, "sollar": allowlist.Sollar}[*format]
	if f == allowlist.Unknown {
		fmt.Fprintf(stderr, "egressd audit suggest: --format must be voiceos or sollar (%q)\n", *format)
		return exitUsage
	}
	verdict, recs, code, err := readVerified(files, *keyFiles, *ckptFile, fileFlags.runLink())
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit suggest:", termsafe.String(err.Error()))
		return code
	}
	if (!verdict.Intact || verdict.RunsUnlinked()) && !*unverified {
		fmt.Fprintln(stderr, "egressd audit suggest:", suggestRefusal(verdict, verifyCommand(*keyFiles, *ckptFile, *fileFlags.filesFrom, *fileFlags.runFiles, given)))
		return exitFail
	}
	if !verdict.Intact || verdict.Unproven() != "" {
		fmt.Fprintln(stderr, "egressd audit suggest:", termsafe.String(audit.VerificationOf(verdict).Headline()))
	}
	observed := audit.ObservedHosts(recs)
	id := *integration
	if id == "" {
		if len(observed) > 1 {
			fmt.Fprintln(stderr, "egressd audit suggest: the log holds several integrations; pass --integration ID")
			return exitUsage
		}
		for k := range observed {
			id = k
		}
	}
	var rules *allowlist.Rules
	if *config != "" {
		cfg, err := policy.LoadConfig(*config)
		if err != nil {
			printConfigError(stderr, *config, err)
			return exitUsage
		}
		rules = &cfg.Rules
	}
	entries, skipped := allowlist.Suggest(observed[id], rules)
	for _, s := range skipped {
		fmt.Fprintf(stderr, "egressd audit suggest: %s cannot be a manifest entry; left out\n", termsafe.String(s))
	}
	for _, w := range allowlist.Siblings(entries, rules) {
		fmt.Fprintf(stderr, "egressd audit suggest: note: several names under %s were seen; %s would cover them, and every name anyone can create there: write it only if the integration's author owns that domain\n", termsafe.String(w[2:]), termsafe.String(w))
	}
	out, err := allowlist.NetworkFragment(f, entries)
	if err != nil {
		fmt.Fprintln(stderr, "egressd audit suggest:", termsafe.String(err.Error()))
		return exitFail
	}
	fmt.Fprintf(stdout, "%s\n", out)
	if !verdict.Intact {
		return exitFail
	}
	return exitOK
}
