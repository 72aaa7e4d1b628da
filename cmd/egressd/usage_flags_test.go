package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTopLevelHelpListsEveryFlagEachCommandsUsageNames: egressd --help
// listed "audit report" without --key and --checkpoints (issue 13, f13j
// item 3), so an operator reading it never learned that report verifies
// with the key. Every flag a command's own usage line names appears in
// that command's entry of the top-level help (commands listed with
// "[flags]" excepted).
func TestTopLevelHelpListsEveryFlagEachCommandsUsageNames(t *testing.T) {
	top, _, _ := runCLI(t, "--help")
	entries := regexp.MustCompile(`(?m)^  (egressd [a-z]+(?: [a-z]+)?)\b(.*)$`).FindAllStringSubmatch(top, -1)
	if len(entries) < 10 {
		t.Fatalf("top-level help lists %d commands:\n%s", len(entries), top)
	}
	flag := regexp.MustCompile(`--[a-z][a-z-]*`)
	for _, e := range entries {
		cmd, line := e[1], e[2]
		if strings.Contains(line, "[flags]") || cmd == "egressd version" {
			continue
		}
		out, errs, _ := runCLI(t, append(strings.Fields(cmd)[1:], "--help")...)
		errs = out + errs
		own := regexp.MustCompile(`(?m)^usage: ` + regexp.QuoteMeta(cmd) + `\b(.*)$`).FindStringSubmatch(errs)
		if own == nil {
			t.Errorf("%s --help has no usage line:\n%s", cmd, errs)
			continue
		}
		for _, f := range flag.FindAllString(own[1], -1) {
			if !regexp.MustCompile(regexp.QuoteMeta(f) + `\b`).MatchString(line) {
				t.Errorf("top-level help for %q omits %s, which its usage names (%s)", cmd, f, strings.TrimSpace(own[0]))
			}
		}
	}
}

// TestExplainWithAStateFolderNamesItsStateFile: explain --state refused a
// widening without a version bump saying "(version memory: version memory
// (this process only))" although a state folder was given (issue 13,
// f13j item 3): the message names the state file it read.
func TestExplainWithAStateFolderNamesItsStateFile(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example"))
	erpFolder(t, dir, "com.acme.erp", "1.0.0", "erp.acme.example", "new.acme.example")
	out, errs, code := runCLI(t, "explain", "--state", state, "--manifest", dir, "new.acme.example")
	if code == exitOK || !strings.Contains(errs, "(version memory: "+filepath.Join(state, "versions.json")) || strings.Contains(errs, "this process only") {
		t.Fatalf("explain --state: exit %d\n%s%s", code, out, errs)
	}
}
