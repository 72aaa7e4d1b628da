package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/egressd/egressd/internal/termsafe"
	"github.com/egressd/egressd/internal/workdir"
)

// parseAnywhere parses fs's flags wherever they stand among args, before,
// between or after the positional arguments ("egressd audit verify RECEIPT
// --run-files DIR", "egressd approve ID VERSION --state DIR": how many
// CLIs are typed; Go's flag package alone stops at the first positional
// one and takes the rest as positional). "--" ends the flags: a positional
// argument that begins with "-" goes after it. It returns the positional
// arguments, those before and after a "--" together.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	words, after, _, err := scanFlags(fs, args, false)
	return append(words, after...), err
}

// parseFilesAnywhere is parseAnywhere for a command whose positional
// arguments are files or folders: they are made absolute as the path
// flags are (see pathFlags).
func parseFilesAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	words, err := parseAnywhere(fs, args)
	if err != nil {
		return nil, err
	}
	abs, err := absPaths(words)
	if err != nil {
		fmt.Fprintf(fs.Output(), "egressd %s: %s\n", fs.Name(), termsafe.String(err.Error()))
		return nil, errPathSaid
	}
	return abs, nil
}

// scanFlags parses fs's flags among args and returns the other words
// before a "--" (words), those after it (after), and whether there was
// one. Which words are a flag's value is read from fs itself (a boolean
// flag takes none; -name=value holds its own), so "--state --" is a
// state folder named "--", not the end of the flags. With stopAtWord
// (egressd run's command line) scanning stops at the first word that is
// not a flag: it and every word after it are returned in words,
// unparsed, since they are a program's own.
func scanFlags(fs *flag.FlagSet, args []string, stopAtWord bool) (words, after []string, dashed bool, err error) {
	var flags []string
scan:
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			after, dashed = args[i+1:], true
			break scan
		case len(a) < 2 || a[0] != '-':
			if stopAtWord {
				words = args[i:]
				break scan
			}
			words = append(words, a)
			continue
		}
		flags = append(flags, a)
		if takesValue(fs, a) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if err := parseFlags(fs, flags); err != nil {
		return nil, nil, false, err
	}
	return words, after, dashed, nil
}

// pathFlags names every flag, in every command, whose value is a place on
// disk. A relative one is made absolute as it is parsed, by workdir.Abs,
// before anything is read or written: a relative --state typed in a
// folder the shell entered through a link named another folder to the
// kernel than to the operator (run wrote a fresh version memory there,
// serve started on it), and a relative --manifest was stored in version
// memory as the place "." and printed back in a command that named
// another folder when pasted elsewhere. A place is always absolute.
// TestEveryPathFlagOfEveryCommandIsNamedInPathFlags walks every command's
// flags against this list.
var pathFlags = map[string]bool{
	"state": true, "config": true, "manifest": true, "folder": true,
	"audit-log": true, "audit-key": true, "key": true, "checkpoints": true,
	"receipt": true, "keep": true, "files-from": true, "run-files": true,
	"upstream-ca": true,
}

// errPathSaid is a path refused by parseFlags, already printed to the flag
// set's output as the flag package prints its own errors.
var errPathSaid = errors.New("a path was refused")

// parseFlags is fs.Parse followed by absPathFlags: the one way every
// command parses its flags.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := absPathFlags(fs); err != nil {
		fmt.Fprintf(fs.Output(), "egressd %s: %s\n", fs.Name(), termsafe.String(err.Error()))
		return errPathSaid
	}
	return nil
}

// absPathFlags makes every path flag of fs absolute (see pathFlags),
// defaults included. "-" (stdin or stdout) and "listener ADDR" (a
// listener's place) are not paths and are kept.
func absPathFlags(fs *flag.FlagSet) error {
	var first error
	fs.VisitAll(func(f *flag.Flag) {
		if !pathFlags[f.Name] || first != nil {
			return
		}
		if list, ok := f.Value.(*multiFlag); ok {
			abs, err := absPaths(*list)
			if err != nil {
				first = fmt.Errorf("--%s: %w", f.Name, err)
			}
			*list = abs
			return
		}
		v := f.Value.String()
		if v == "" || v == "-" || strings.HasPrefix(v, "listener ") {
			return
		}
		abs, err := workdir.Abs(v)
		if err == nil {
			err = f.Value.Set(abs)
		}
		if err != nil {
			first = fmt.Errorf("--%s: %w", f.Name, err)
		}
	})
	return first
}

// absPaths is paths made absolute by workdir.Abs, "-" kept: the positional
// files and folders a command takes, and a repeatable path flag's values.
func absPaths(paths []string) ([]string, error) {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = p
		if p == "" || p == "-" {
			continue
		}
		abs, err := workdir.Abs(p)
		if err != nil {
			return nil, err
		}
		out[i] = abs
	}
	return out, nil
}

// takesValue reports whether the flag word a is followed by its value:
// a flag fs defines that is not boolean, given without "=value". An
// unknown flag takes none; fs.Parse reports it.
func takesValue(fs *flag.FlagSet, a string) bool {
	name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
	if strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}
