package sandbox

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/egressd/egressd/internal/workdir"
)

// Program is the target's executable, and what of the host must be bound
// for it to run.
type Program struct {
	// Path is the absolute path the sandbox executes.
	Path string
	// Bind is empty, or the one host file to bind read-only at Path: the
	// executable itself, never its folder.
	Bind string
}

// systemPrefixes are bound into every sandbox anyway.
var systemPrefixes = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// ResolveProgram finds the program to run for an integration in dir.
//
// A manifest is third-party input, so when it names the program
// (byOperator false) nothing it writes may choose a host path: a bare name
// is looked up in the launcher's own PATH, and a relative path must stay
// inside the integration folder once every symlink is resolved. The
// operator (byOperator true, the command after "--") may name any path.
// Either way, a program outside the system folders and the integration
// folder is bound alone, not with its folder's other files.
func ResolveProgram(name, dir string, byOperator bool) (Program, error) {
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return Program{}, err
	}
	return ResolveProgramIn(name, dir, realDir, byOperator)
}

// ResolveProgramIn is ResolveProgram for the folder bound at dir whose real
// path, read from the descriptor egressd holds (FolderPath), is realDir: a
// name inside the folder is looked up under realDir, never through dir,
// which the author may point elsewhere at any time.
func ResolveProgramIn(name, dir, realDir string, byOperator bool) (Program, error) {
	if !strings.Contains(name, "/") {
		found, err := exec.LookPath(name)
		if err != nil {
			return Program{}, fmt.Errorf("the runtime %q is not installed (not in PATH)", name)
		}
		if found, err = workdir.Abs(found); err != nil {
			return Program{}, err
		}
		return hostProgram(found, dir, realDir)
	}
	if !byOperator && !filepath.IsLocal(name) {
		return Program{}, fmt.Errorf("runtime.command %q names a path outside the integration folder; a manifest does not choose host paths (pass the program after -- to run it)", name)
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(realDir, name)
	}
	if !byOperator {
		real, err := filepath.EvalSymlinks(name)
		if err != nil {
			return Program{}, err
		}
		if _, inside := within(real, realDir); !inside {
			return Program{}, fmt.Errorf("runtime.command %q resolves to %s, outside the integration folder: a symlink in the folder does not choose host paths", name, real)
		}
	}
	return hostProgram(name, dir, realDir)
}

// hostProgram resolves path to the file itself and says what to bind: the
// file alone, unless the sandbox already shows it (a system folder, the
// integration folder, where it runs under the folder's path as bound).
func hostProgram(path, dir, realDir string) (Program, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return Program{}, err
	}
	if rel, inside := within(real, realDir); inside {
		return Program{Path: filepath.Join(dir, rel)}, nil
	}
	for _, sys := range systemPrefixes {
		if _, inside := within(real, sys); inside {
			return Program{Path: real}, nil
		}
	}
	return Program{Path: real, Bind: real}, nil
}

// within reports whether path is dir or under it, and its path from dir.
func within(path, dir string) (string, bool) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || rel != "." && !filepath.IsLocal(rel) {
		return "", false
	}
	return rel, true
}
