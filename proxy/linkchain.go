package proxy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/egressd/egressd/internal/workdir"
)

// Bounds on following one path's symbolic links by hand, as the watcher
// and the writable-manifest check do. An integration that owns its folder
// chose both the links and how deep they point: 40 links, each into a
// folder ~1,980 levels down, cost the old walk (one lstat per prefix,
// from the root, for every link) ~80,000 lstat calls of ~2,000 components
// each per resolve, three resolves per file per check: a core kept busy,
// and the operator's change to another integration applied a minute late.
const (
	maxLinks = 40 // as the kernel's ELOOP
	// maxComponents bounds the path components one resolve examines
	// (one lstat each at most), so each lstat walks at most this many
	// plus the operator's own prefix. A ConfigMap path takes ~15.
	maxComponents = 256
)

// linkChain is what a path resolves to, link by link.
type linkChain struct {
	links      []string // each symbolic link gone through, in order
	final      string   // where it ends; where the walk stopped when tooDeep
	components int      // path components examined, each with at most one lstat
	tooDeep    string   // why the walk stopped early ("" if it did not)
}

// resolveChain follows path one component at a time, as the kernel does,
// continuing from where a link leads rather than from the root. A missing
// component ends the walk there (final is the path as it would be). A walk
// past maxLinks or maxComponents stops and says so in tooDeep.
func resolveChain(path string) linkChain {
	var c linkChain
	p, err := workdir.Abs(path)
	if err != nil {
		return linkChain{final: path}
	}
	rest := strings.Split(p, "/")
	cur := "/"
	for len(rest) > 0 {
		part := rest[0]
		rest = rest[1:]
		if part == "" || part == "." {
			continue
		}
		if c.components == maxComponents {
			c.tooDeep = fmt.Sprintf("resolves through more than %d path components", maxComponents)
			c.final = filepath.Join(cur, part)
			return c
		}
		c.components++
		if part == ".." {
			cur = filepath.Dir(cur) // cur has no links in it: its parent is real
			continue
		}
		here := filepath.Join(cur, part)
		st, err := os.Lstat(here)
		if err != nil {
			c.final = filepath.Join(append([]string{here}, rest...)...)
			return c
		}
		if st.Mode()&os.ModeSymlink == 0 {
			cur = here
			continue
		}
		if len(c.links) == maxLinks {
			c.tooDeep = fmt.Sprintf("resolves through more than %d symbolic links", maxLinks)
			c.final = here
			return c
		}
		target, err := os.Readlink(here)
		if err != nil {
			c.final = filepath.Join(append([]string{here}, rest...)...)
			return c
		}
		c.links = append(c.links, here)
		if filepath.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	c.final = cur
	return c
}
