package proxy

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"unicode/utf8"

	"github.com/egressd/egressd/internal/workdir"
)

// manifestWriters lists, one sentence each, who besides the operator can
// change the manifest at path: the file itself and every folder above it,
// both as named and as its links resolve (a ConfigMap's visible link and
// the timestamped folder it points into). The operator is root and
// egressd's own user; anyone else who owns one of them, or may write it
// through its group or other bits, can change the list. A sticky folder
// (like /tmp) lets others create entries but not replace one that root or
// egressd owns, so it is not counted when the entry below it is safe.
//
// The work is bounded as the watcher's is (resolveChain): a path past the
// bounds is one sentence saying so, and its target is not examined; at
// most maxComponents folders are examined above each end.
func manifestWriters(path string) []string {
	abs, err := workdir.Abs(path)
	if err != nil {
		return nil
	}
	c := resolveChain(abs)
	var out []string
	starts := []string{c.final, abs} // the file it reads first: the first writer a warning names
	if c.tooDeep != "" {
		out = append(out, fmt.Sprintf("%s %s: egressd does not follow it, so it cannot tell who can change what it leads to, and does not watch it for changes", shortPath(abs), c.tooDeep))
		starts = starts[1:]
	}
	seen := map[string]bool{}
	for _, start := range starts {
		childSafe := true
		p := start
		for range maxComponents {
			if !seen[p] {
				seen[p] = true
				why, safe := writers(p, childSafe)
				if why != "" {
					out = append(out, why)
				}
				childSafe = safe
			}
			if p == "/" || p == "." {
				break
			}
			p = filepath.Dir(p)
		}
	}
	return out
}

// shortPath keeps a path of a sentence readable and its line short: an
// integration chooses how deep its own folders go (a 4,000-byte path,
// once per folder, was 4 MB of audit log per reload).
func shortPath(p string) string {
	const keep = 96
	if len(p) <= 2*keep+16 {
		return p
	}
	head, tail := keep, len(p)-keep
	for head > 0 && !utf8.RuneStart(p[head]) {
		head--
	}
	for tail < len(p) && !utf8.RuneStart(p[tail]) {
		tail++
	}
	return fmt.Sprintf("%s…(%d bytes)…%s", p[:head], tail-head, p[tail:])
}

// writers says who besides the operator can change p ("" if no one), and
// whether p is itself safe (owned by the operator), for the folder above.
func writers(p string, childSafe bool) (string, bool) {
	st, err := os.Lstat(p)
	if err != nil {
		return "", true
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return "", true
	}
	uid, gid := sys.Uid, sys.Gid
	owned := uid == 0 || int(uid) == os.Geteuid()
	mode := st.Mode()
	if mode&os.ModeSymlink != 0 {
		return "", owned // a link's own mode means nothing; its owner and folder do
	}
	sticky := st.IsDir() && mode&os.ModeSticky != 0 && childSafe
	var who []string
	if !owned {
		who = append(who, fmt.Sprintf("its owner, uid %d", uid))
	}
	if mode.Perm()&0o020 != 0 && gid != 0 && int(gid) != os.Getegid() && !sticky {
		who = append(who, fmt.Sprintf("group %d", gid))
	}
	if mode.Perm()&0o002 != 0 && !sticky {
		who = append(who, "every user")
	}
	if len(who) == 0 {
		return "", owned
	}
	list := who[0]
	for i, w := range who[1:] {
		if i == len(who)-2 {
			list += " and " + w
		} else {
			list += ", " + w
		}
	}
	return fmt.Sprintf("%s can be changed by %s (mode %v, owner %d, group %d)", shortPath(p), list, mode.Perm(), uid, gid), owned
}
