package workdir_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egressd/egressd/internal/workdir"
)

// TestAbsRefusesARelativePathWhenPWDSpellsTheWorkingDirectoryThroughALink:
// a shell that entered real/ through link/ sets PWD=…/link. filepath.Abs
// trusts it and names one place, a service manager's start (no PWD) names
// another; Abs refuses to choose and asks for the path from /. With no
// PWD, or one naming the directory as the kernel does, it joins.
func TestAbsRefusesARelativePathWhenPWDSpellsTheWorkingDirectoryThroughALink(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real, link := filepath.Join(base, "real"), filepath.Join(base, "link")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real", link); err != nil {
		t.Fatal(err)
	}
	t.Chdir(link) // sets PWD to the link spelling, as a shell's cd does
	if pwd := os.Getenv("PWD"); pwd != link {
		t.Fatalf("PWD is %q, want the link spelling %q", pwd, link)
	}
	if viaPWD, _ := filepath.Abs("F"); viaPWD != filepath.Join(link, "F") {
		t.Fatalf("filepath.Abs no longer trusts PWD (%q): the attack this package stops needs another test", viaPWD)
	}
	got, err := workdir.Abs("F")
	if err == nil || !strings.Contains(err.Error(), filepath.Join(link, "F")) || !strings.Contains(err.Error(), filepath.Join(real, "F")) {
		t.Fatalf("Abs(F) with PWD through a link = %q, %v; want a refusal naming both spellings", got, err)
	}
	if got, _ := workdir.Abs(link + "/./F"); got != filepath.Join(link, "F") {
		t.Fatalf("an absolute path keeps the links the operator typed: got %q", got)
	}
	for _, pwd := range []string{"", real, filepath.Join(base, "elsewhere")} {
		t.Setenv("PWD", pwd)
		if got, err := workdir.Abs("F"); err != nil || got != filepath.Join(real, "F") {
			t.Fatalf("PWD=%q: Abs(F) = %q, %v; want %q (the kernel's working directory)", pwd, got, err, filepath.Join(real, "F"))
		}
	}
}

// TestAbsFailsWhenTheWorkingDirectoryIsGone: with the folder removed there
// is no place to name; Abs says so rather than guess one from $PWD.
func TestAbsFailsWhenTheWorkingDirectoryIsGone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if got, err := workdir.Abs("F"); err == nil {
		t.Fatalf("Abs(F) in a removed folder = %q, want an error", got)
	}
}

// TestNoSourceMakesAPathAbsoluteThroughPWD: every path egressd makes
// absolute goes through Abs. A filepath.Abs or os.Getwd call added later
// would bring $PWD back as a place's spelling; this test names it.
func TestNoSourceMakesAPathAbsoluteThroughPWD(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && (pkg.Name == "filepath" && sel.Sel.Name == "Abs" || pkg.Name == "os" && sel.Sel.Name == "Getwd") {
				t.Errorf("%s: %s.%s reads $PWD; use workdir.Abs or workdir.Get", fset.Position(sel.Pos()), pkg.Name, sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
