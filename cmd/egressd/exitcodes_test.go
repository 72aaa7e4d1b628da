package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestExitCodesOfEveryCommandAreTheDocumentedOnes runs the built binary
// through each row of README's exit-code table, and every command's
// --help. Rows run in order: the run row writes the audit log the audit
// rows read.
func TestExitCodesOfEveryCommandAreTheDocumentedOnes(t *testing.T) {
	requireSandbox(t)
	bin := egressdBinary(t)
	coffee := mustAbs(t, "../../configs/examples/coffee-tracker")
	hostile := mustAbs(t, "../../configs/examples/hostile")
	tmp := t.TempDir()
	state := filepath.Join(tmp, "state")
	badConfig := filepath.Join(tmp, "bad.yaml")
	os.WriteFile(badConfig, []byte("integrations:\n  - manifest: x\n    listen: 127.0.0.1:3128\n    ports: [80]\n"), 0o600)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var runLog string // the audit log egressd run says it writes
	tampered := filepath.Join(tmp, "tampered.log")
	unreadable := filepath.Join(tmp, "no-such-dir", "audit.log")

	rows := []exitRow{
		{name: "no command", args: args(), code: 2, stderr: "usage:"},
		{name: "unknown command", args: args("frobnicate"), code: 2, stderr: `unknown command "frobnicate"`},
		{name: "--help", args: args("--help"), code: 0, stdout: "exit status:"},
		{name: "help COMMAND", args: args("help", "audit"), code: 0, stdout: "usage: egressd audit verify|report|suggest"},
		{name: "version", args: args("version"), code: 0, stdout: "egressd "},

		{name: "check ok", args: args("check", coffee), code: 0},
		{name: "check finds errors", args: args("check", hostile), code: 1},
		{name: "check usage", args: args("check"), code: 2},

		{name: "explain allowed", args: args("explain", "--manifest", coffee, "api.coffee.example"), code: 0},
		{name: "explain denied", args: args("explain", "--manifest", coffee, "evil.example"), code: 1},
		{name: "explain without --manifest", args: args("explain", "api.coffee.example"), code: 2, stderr: `--manifest PATH is missing`},
		{name: "explain without target", args: args("explain", "--manifest", coffee), code: 2, stderr: `HOST\[:PORT\] is missing`},
		{name: "explain unloadable manifest", args: args("explain", "--manifest", hostile, "x.example"), code: 2},

		{name: "approve usage", args: args("approve", "--yes", "--state", state, "com.acme.erp"), code: 2},
		{name: "approve cannot write", args: args("approve", "--yes", "--state", "/dev/null", "com.acme.erp", "2.5.0"), code: 1},
		{name: "approve unconfirmed (stdin not a terminal, no --yes)", args: args("approve", "--state", filepath.Join(tmp, "new-state"), "--new-id", "--manifest", coffee), code: 2, stdout: "to approve: com.you.coffee-tracker", stderr: "give --yes"},

		{name: "serve usage", args: args("serve", "stray-operand"), code: 2},
		{name: "serve bad config", args: args("serve", "--config", badConfig), code: 2, stderr: `unknown field "ports"`},
		{name: "serve cannot start", args: func() []string {
			return []string{"serve", "--manifest", coffee, "--listen", busy.Addr().String(), "--state", state, "--audit-log", filepath.Join(tmp, "serve.log"), "--resolver", "127.0.0.1:9"}
		}, code: 1, stderr: "address already in use"},

		{name: "run usage", args: args("run"), code: 2},
		{name: "run cannot start", args: args("run", "--state", state, filepath.Join(tmp, "no-such-integration"), "--", "true"), code: 1},
		{name: "run exits with its program's status", args: args("run", "--state", state, "--resolver", "127.0.0.1:9", coffee, "--", "/bin/sh", "-c", "exit 3"), code: 3,
			stderr: `(?m)^egressd run: audit log (` + regexp.QuoteMeta(filepath.Join(state, "audit", "com.you.coffee-tracker.")) + `\d+\.log)$`,
			after: func(stderr string) {
				runLog = regexp.MustCompile(`audit log (\S+)`).FindStringSubmatch(stderr)[1]
				data, err := os.ReadFile(runLog)
				if err != nil || !bytes.Contains(data, []byte(`"msg":"exit status 3"`)) {
					t.Fatalf("the audit log egressd run named: %v\n%s", err, data)
				}
				os.WriteFile(tampered, bytes.Replace(data, []byte("exit status 3"), []byte("exit status 0"), 1), 0o600)
			}},

		{name: "audit usage", args: args("audit"), code: 2},
		{name: "audit verify intact", args: func() []string { return []string{"audit", "verify", runLog} }, code: 0, stdout: "intact"},
		{name: "audit verify broken", args: args("audit", "verify", tampered), code: 1, stdout: "BROKEN"},
		{name: "audit verify usage", args: args("audit", "verify"), code: 2},
		{name: "audit verify unreadable", args: args("audit", "verify", unreadable), code: 2},
		{name: "audit report", args: func() []string { return []string{"audit", "report", runLog} }, code: 0},
		{name: "audit report unreadable", args: args("audit", "report", unreadable), code: 1},
		{name: "audit report usage", args: args("audit", "report"), code: 2},
		{name: "audit suggest", args: func() []string { return []string{"audit", "suggest", runLog} }, code: 0},
		{name: "audit suggest of a log that does not verify", args: args("audit", "suggest", tampered), code: 1, stderr: "LOG NOT VERIFIED"},
		{name: "audit suggest usage", args: args("audit", "suggest"), code: 2},
		{name: "audit suggest unreadable", args: args("audit", "suggest", unreadable), code: 1},
		{name: "audit prune usage", args: args("audit", "prune", unreadable), code: 2},
		{name: "audit prune unreadable", args: args("audit", "prune", "--receipt", filepath.Join(tmp, "receipt.log"), "--keep", unreadable, unreadable), code: 1},
		{name: "check missing file", args: args("check", filepath.Join(tmp, "no-such-manifest")), code: 1},
	}
	for _, cmd := range []string{"serve", "check", "explain", "approve", "run", "audit", "audit verify", "audit report", "audit suggest", "audit prune"} {
		for _, help := range []string{"--help", "-h"} {
			rows = append(rows, exitRow{name: cmd + " " + help, args: args(append(strings.Fields(cmd), help)...), code: 0, stdout: "usage: egressd " + cmd})
		}
	}
	for _, row := range rows {
		cmd := exec.Command(bin, row.args()...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		if code != row.code || !strings.Contains(stdout.String(), row.stdout) || !regexp.MustCompile(row.stderr).MatchString(stderr.String()) {
			t.Fatalf("%s: egressd %s\nexit %d, want %d (README's table)\nstdout (want %q):\n%s\nstderr (want /%s/):\n%s",
				row.name, strings.Join(row.args(), " "), code, row.code, row.stdout, stdout.String(), row.stderr, stderr.String())
		}
		if row.after != nil {
			row.after(stderr.String())
		}
	}
}

// exitRow is one command line and what it must give.
type exitRow struct {
	name   string
	args   func() []string // called when the row runs: earlier rows fill some in
	code   int
	stdout string // a substring of stdout
	stderr string // a regexp stderr must match
	after  func(stderr string)
}

// args is a fixed command line, for the table.
func args(a ...string) func() []string { return func() []string { return a } }
