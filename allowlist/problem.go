package allowlist

import (
	"strings"
	"unicode/utf8"

	"github.com/egressd/egressd/internal/termsafe"
)

// Severity says whether a problem stops a manifest from loading.
type Severity uint8

const (
	// Error makes the manifest unusable: it yields no allowlist.
	Error Severity = iota
	// Warning is reported, and the manifest loads anyway.
	Warning
)

// Problem is one finding about a manifest, addressed by a JSON path such as
// "permissions[0].domains[2]".
type Problem struct {
	Path     string
	Msg      string
	Severity Severity
}

// String returns "path: message", the form every report uses. The path
// holds the author's keys: it is shortened to maxPathShown bytes and its
// quotes escaped, so no key reaches the operator's journal as a line of
// its own making (round 38: a 48 KB key ending in a checkpoint object,
// printed raw by serve's reload warning, was split off by journald at its
// line limit and read by audit verify as a checkpoint, calling an honest
// log BROKEN).
func (p Problem) String() string {
	if p.Path == "" {
		return p.Msg
	}
	return shownPath(p.Path) + ": " + p.Msg
}

// maxPathShown bounds a problem's path as printed.
const maxPathShown = 256

func shownPath(path string) string {
	if len(path) > maxPathShown {
		cut := maxPathShown
		for cut > 0 && !utf8.RuneStart(path[cut]) {
			cut--
		}
		path = path[:cut] + "…"
	}
	return strings.ReplaceAll(path, `"`, `\"`)
}

// Problems is the list of findings for one manifest, in document order.
type Problems []Problem

// HasErrors reports whether any problem is an Error.
func (ps Problems) HasErrors() bool {
	for _, p := range ps {
		if p.Severity == Error {
			return true
		}
	}
	return false
}

// Errors returns the Error problems only.
func (ps Problems) Errors() Problems { return ps.filter(Error) }

// Warnings returns the Warning problems only.
func (ps Problems) Warnings() Problems { return ps.filter(Warning) }

func (ps Problems) filter(s Severity) Problems {
	var out Problems
	for _, p := range ps {
		if p.Severity == s {
			out = append(out, p)
		}
	}
	return out
}

// Error joins the problems one per line, so Problems can travel as an
// error. That form ends on a terminal or in a log a person reads, so each
// problem's control characters are escaped (a key may hold a newline or an
// escape sequence); String keeps the exact path for machine output.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = termsafe.String(p.String())
	}
	return strings.Join(lines, "\n")
}

func (ps *Problems) errorf(path, msg string) { *ps = append(*ps, Problem{Path: path, Msg: msg}) }
func (ps *Problems) warnf(path, msg string) {
	*ps = append(*ps, Problem{Path: path, Msg: msg, Severity: Warning})
}
