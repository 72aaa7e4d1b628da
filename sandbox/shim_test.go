package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHomeShimsAreToldApartFromProgramsThatRun judges real files in a
// temporary home: the shims of pyenv, asdf, volta and mise are refused, with the
// system interpreter on PATH as the hint; a real binary under the home
// folder (as nvm installs node), a virtualenv's link to the system
// interpreter, a self-contained script, a program
// outside the home folder and a path given by the caller are not.
func TestHomeShimsAreToldApartFromProgramsThatRun(t *testing.T) {
	home := t.TempDir()
	sys := t.TempDir() // stands for /usr/bin
	write := func(path, body string) string {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	elf, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(sys, "python3"), string(elf[:64]))
	pyenv := write(filepath.Join(home, ".pyenv/shims/python3"), "#!/usr/bin/env bash\nexec \""+home+"/.pyenv/libexec/pyenv\" exec python3 \"$@\"\n")
	asdf := write(filepath.Join(home, ".asdf/bin/node"), "#!/usr/bin/env bash\nexec $HOME/.asdf/bin/asdf exec node \"$@\"\n")
	volta := write(filepath.Join(home, ".volta/bin/volta-shim"), string(elf[:64]))
	os.Symlink(volta, filepath.Join(home, ".volta/bin/npm"))
	nvm := write(filepath.Join(home, ".nvm/versions/node/v22/bin/node"), string(elf[:64]))
	mise := write(filepath.Join(home, ".local/bin/mise"), string(elf[:64]))
	os.MkdirAll(filepath.Join(home, ".local/share/mise/shims"), 0o755)
	os.Symlink(mise, filepath.Join(home, ".local/share/mise/shims/go"))
	os.MkdirAll(filepath.Join(home, "venv/bin"), 0o755)
	os.Symlink(filepath.Join(sys, "python3"), filepath.Join(home, "venv/bin/python3"))
	own := write(filepath.Join(home, "bin/tool"), "#!/bin/sh\necho self-contained\n")
	path := strings.Join([]string{filepath.Join(home, ".pyenv/shims"), sys}, ":")

	for _, tc := range []struct {
		name, file string
		refused    bool
	}{
		{"python3", pyenv, true},
		{"node", asdf, true},
		{"npm", filepath.Join(home, ".volta/bin/npm"), true},
		{"go", filepath.Join(home, ".local/share/mise/shims/go"), true},
		{"node", nvm, false},
		{"python3", filepath.Join(home, "venv/bin/python3"), false},
		{"tool", own, false},
		{"python3", filepath.Join(sys, "python3"), false},
	} {
		err := RefuseHomeShim(tc.name, tc.file, home, path)
		if (err != nil) != tc.refused {
			t.Errorf("%s: refused %v, want %v (%v)", tc.file, err != nil, tc.refused, err)
		}
	}
	err = RefuseHomeShim("python3", pyenv, home, path)
	if err == nil || !strings.HasSuffix(err.Error(), "give the interpreter's real path, such as "+filepath.Join(sys, "python3")) {
		t.Errorf("no hint to the interpreter outside the home folder: %v", err)
	}
	if err := RefuseHomeShim(pyenv, pyenv, home, path); err != nil {
		t.Errorf("a path the caller gave was judged: %v", err)
	}
}
