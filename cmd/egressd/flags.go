package main

import (
	"flag"
	"strings"
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
	return words, after, dashed, fs.Parse(flags)
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
