package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// commandsWithFlags are every command the top-level usage lists, as the
// words that name it, with the flags its --help prints (the flag set's
// own PrintDefaults: the flag sets walked, not a list kept by hand).
func commandsWithFlags(t *testing.T) map[string][]string {
	t.Helper()
	top, _, _ := runCLI(t, "--help")
	entries := regexp.MustCompile(`(?m)^  egressd ([a-z]+(?: (?:verify|report|suggest|prune))?)\b`).FindAllStringSubmatch(top, -1)
	flagLine := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)
	cmds := map[string][]string{}
	for _, e := range entries {
		if e[1] == "version" {
			continue
		}
		out, errs, _ := runCLI(t, append(strings.Fields(e[1]), "--help")...)
		for _, m := range flagLine.FindAllStringSubmatch(out+errs, -1) {
			cmds[e[1]] = append(cmds[e[1]], m[1])
		}
		if len(cmds[e[1]]) == 0 {
			t.Fatalf("egressd %s --help prints no flags:\n%s%s", e[1], out, errs)
		}
	}
	if len(cmds) < 11 {
		t.Fatalf("found %d commands in the usage:\n%s", len(cmds), top)
	}
	return cmds
}

// notPathFlags are the flags whose value is not a place on disk.
var notPathFlags = map[string]bool{
	"yes": true, "digest": true, "new-id": true, "json": true, "listen": true, "format": true,
	"integration": true, "unverified": true, "mode": true, "resolver": true, "allow-private": true,
	"allow-port": true, "env": true, "secret": true, "insecure-env-only": true, "admin": true,
}

// TestEveryPathFlagOfEveryCommandIsNamedInPathFlags walks every command's
// flag set: each flag is either a path, made absolute as it is parsed
// (pathFlags), or named here as not one. A path flag added later without
// pathFlags would be read against the kernel's working directory again.
func TestEveryPathFlagOfEveryCommandIsNamedInPathFlags(t *testing.T) {
	for cmd, flags := range commandsWithFlags(t) {
		for _, f := range flags {
			if pathFlags[f] == notPathFlags[f] {
				t.Errorf("egressd %s --%s: say whether it is a path (pathFlags) or not (notPathFlags)", cmd, f)
			}
		}
	}
}

// TestParsingMakesEveryPathFlagAndPositionalPathAbsolute: in a folder
// entered with no link, every path flag's value (a repeatable one's each)
// and every positional file comes out of parsing absolute, "-" and
// "listener ADDR" kept: no relative path reaches version memory or a
// printed command. "approve --manifest voiceos.integration.json" stored
// the place "." and printed "state forget --folder .", which names
// another folder wherever it is pasted.
func TestParsingMakesEveryPathFlagAndPositionalPathAbsolute(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	fs := newFlagSet("test", "usage", &bytes.Buffer{})
	got := map[string]*string{}
	for name := range pathFlags {
		if name != "manifest" {
			got[name] = fs.String(name, "", "")
		}
	}
	var manifests multiFlag
	fs.Var(&manifests, "manifest", "")
	args := []string{"a/b", "-", "--manifest", "m1", "--manifest", "../m2", "--folder", "listener 127.0.0.1:1", "--files-from", "-"}
	for name := range got {
		if name != "folder" && name != "files-from" {
			args = append(args, "--"+name, "../x/"+name)
		}
	}
	pos, err := parseFilesAnywhere(fs, args)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "a/b"), "-"}; strings.Join(pos, " ") != strings.Join(want, " ") {
		t.Errorf("positional: %q, want %q", pos, want)
	}
	if want := []string{filepath.Join(dir, "m1"), filepath.Join(filepath.Dir(dir), "m2")}; strings.Join(manifests, " ") != strings.Join(want, " ") {
		t.Errorf("--manifest: %q, want %q", manifests, want)
	}
	for name, v := range got {
		want := filepath.Join(filepath.Dir(dir), "x", name)
		switch name {
		case "folder":
			want = "listener 127.0.0.1:1"
		case "files-from":
			want = "-"
		}
		if *v != want {
			t.Errorf("--%s: %q, want %q", name, *v, want)
		}
	}
}

// pathCase is one command line that gives a relative path: as a flag's
// value or a positional argument.
type pathCase struct {
	name, rel string
	args      []string
}

// relativePathCases is, for every command, each path flag its flag set
// has given the relative value "rel-FLAG", and each positional path given
// as "rel-arg", with the other words the command needs to get that far.
func relativePathCases(t *testing.T, abs, state string) []pathCase {
	needs := map[string][]string{
		"explain": {"api.example"}, "approve": {"com.test.rel", "1.0.0"}, "state": {"list"},
		"serve":        {"--listen", "127.0.0.1:0", "--resolver", "127.0.0.1:9"},
		"run":          {"--resolver", "127.0.0.1:9", abs, "--", "/bin/true"},
		"audit verify": {abs}, "audit report": {abs}, "audit suggest": {abs}, "audit prune": {abs},
	}
	var cases []pathCase
	for cmd, flags := range commandsWithFlags(t) {
		for _, f := range flags {
			if pathFlags[f] {
				rel := "rel-" + f
				args := append(append(strings.Fields(cmd), "--"+f, rel), needs[cmd]...)
				if cmd == "run" && f == "manifest" {
					args = append(strings.Fields(cmd), "--"+f, rel, "--resolver", "127.0.0.1:9", "--", "/bin/true")
				}
				if f != "state" && (cmd == "approve" || cmd == "state" || cmd == "run" || cmd == "serve") {
					args = append(append(strings.Fields(cmd), "--state", state), args[1:]...) // never the host's default
				}
				cases = append(cases, pathCase{cmd + " --" + f, rel, args})
			}
		}
	}
	for _, c := range [][]string{
		{"check", "rel-arg"},
		{"audit", "verify", "rel-arg"}, {"audit", "report", "rel-arg"}, {"audit", "suggest", "rel-arg"},
		{"audit", "prune", "--key", abs, "--receipt", abs + ".receipt", "--keep", abs, "rel-arg"},
		{"run", "--state", state, "--resolver", "127.0.0.1:9", "rel-arg", "--", "/bin/true"},
	} {
		cases = append(cases, pathCase{strings.Join(c, " "), "rel-arg", c})
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].name < cases[j].name })
	return cases
}

// treeOf lists every name under root with its size: what a command wrote.
func treeOf(t *testing.T, root string) string {
	var b strings.Builder
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			info, _ := d.Info()
			if info != nil {
				fmt.Fprintf(&b, "%s %s %d\n", p, info.Mode(), info.Size())
			}
		}
		return nil
	})
	return b.String()
}

// TestARelativePathFromAShellThatEnteredThroughALinkIsRefusedByEveryCommand
// is the attack of round 27 (f8, f1) on every command: from a shell that
// entered real/ through link/ (PWD=…/link), "--state ../../st" named
// another folder to the kernel than to the operator. run wrote a new
// version memory there (a first load of the widened list) before the
// sandbox step refused; serve started on it with no warning; approve
// --manifest voiceos.integration.json bound a claim at the place ".".
// Every path flag and positional path of every command is now refused up
// front, naming both spellings, and nothing is written anywhere.
func TestARelativePathFromAShellThatEnteredThroughALinkIsRefusedByEveryCommand(t *testing.T) {
	bin := egressdBinary(t)
	d := newPWDLinkFolder(t)
	d.manifest(t, "com.test.rel", "a.example")
	abs := filepath.Join(d.real, "F")
	base := filepath.Dir(d.real)
	for _, c := range relativePathCases(t, abs, filepath.Join(filepath.Dir(d.real), "st")) {
		before := treeOf(t, base)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, bin, c.args...)
		cmd.Dir, cmd.Env = d.link, environ(d.link)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		timedOut := ctx.Err() != nil
		cancel()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if timedOut || code != exitUsage || !strings.Contains(errb.String(), "entered through a link") ||
			!strings.Contains(errb.String(), filepath.Join(d.link, c.rel)) {
			t.Errorf("egressd %s with PWD=%s: exit %d (timed out: %v), want 2 and a refusal naming the link:\n%s%s",
				strings.Join(c.args, " "), d.link, code, timedOut, out.String(), errb.String())
		}
		if after := treeOf(t, base); after != before {
			t.Errorf("egressd %s wrote:\nbefore:\n%s\nafter:\n%s", strings.Join(c.args, " "), before, after)
		}
		if _, err := os.Lstat(filepath.Join(d.real, c.rel)); err == nil {
			t.Errorf("egressd %s created %s", c.name, filepath.Join(d.real, c.rel))
		}
	}
}
