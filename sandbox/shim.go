package sandbox

import (
	"bytes"
	"fmt"
	"github.com/egressd/egressd/internal/safefile"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// RefuseHomeShim explains, before anything starts, why a program found
// through PATH cannot run in the sandbox: it resolves to a version
// manager's shim (pyenv, rbenv, asdf, nodenv, mise, volta) under the home
// folder. The sandbox shows only the program's own folder of the home, so
// the shim starts and then fails to find the manager it hands over to,
// with exit 127 and an error about a file the user never named.
//
// name is the command as given: only a bare name, looked up in PATH, is
// judged (a path is the caller's own choice). path is what it resolved to,
// home the launcher's home folder and pathList its PATH. It returns nil for
// anything that is not such a shim: a real binary under the home folder
// (nvm's node) runs from its bound folder.
func RefuseHomeShim(name, path, home, pathList string) error {
	home = filepath.Clean(home)
	if strings.Contains(name, "/") || home == "" || home == "/" || home == "." || !under(path, home) || !isHomeShim(path, home) {
		return nil
	}
	hint := "installed outside the home folder"
	if real := lookPathOutside(name, home, pathList); real != "" {
		hint = "such as " + real
	}
	return fmt.Errorf("%s resolves to %s, a shim under the home folder (%s), which the sandbox does not show; give the interpreter's real path, %s",
		name, path, home, hint)
}

// isHomeShim reports whether path hands over to something the sandbox
// will not show: it sits in a "shims" folder, it is a symbolic link to a
// shim or out of its folder into the home folder, or it is a script that
// names the home folder.
func isHomeShim(path, home string) bool {
	dir := filepath.Dir(path)
	if filepath.Base(dir) == "shims" {
		return true
	}
	if target, err := filepath.EvalSymlinks(path); err == nil && target != path {
		// A link to a file the sandbox will not show (mise), or to a
		// dispatcher named as one (volta-shim). A link to /usr/bin, as a
		// virtualenv's python is, runs.
		if (under(target, home) && filepath.Dir(target) != dir) || strings.Contains(filepath.Base(target), "shim") {
			return true
		}
	}
	f, err := safefile.OpenRegular(path) // a FIFO or a terminal there must neither block nor become egressd's
	if err != nil {
		return false
	}
	defer f.Close()
	head, _ := io.ReadAll(io.LimitReader(f, 64<<10)) // shims are a few lines
	if !bytes.HasPrefix(head, []byte("#!")) {
		return false // a binary: it runs from its bound folder
	}
	for _, mention := range []string{home + "/", "$HOME", "${HOME}", "~/"} {
		if bytes.Contains(head, []byte(mention)) {
			return true
		}
	}
	return false
}

// lookPathOutside finds name in the PATH folders outside home, for the hint.
func lookPathOutside(name, home, pathList string) string {
	for _, dir := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(dir) || under(dir, home) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// under reports whether path is dir or below it.
func under(path, dir string) bool {
	_, ok := within(path, dir)
	return ok
}
