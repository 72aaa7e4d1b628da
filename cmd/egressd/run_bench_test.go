package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkRunStartup measures egressd run's start-up overhead: the whole
// life of `egressd run DIR -- /bin/true` against a plain fork/exec of
// /bin/true, in the same run. Report the difference of the two ns/op.
func BenchmarkRunStartup(b *testing.B) {
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"manifest_version":1,"id":"com.test.bench","version":"1.0.0","network":{"connect":["api.bench.example"]}}`), 0o644)
	os.Chmod(dir, 0o755)
	state := b.TempDir()
	bin := egressdBinary(b)
	b.Run("fork_exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("egressd_run", func(b *testing.B) {
		for b.Loop() {
			if out, err := exec.Command(bin, "run", "--state", state, "--resolver", "127.0.0.1:9", "--audit-log", filepath.Join(state, "a.log"), dir, "--", "/bin/true").CombinedOutput(); err != nil {
				b.Fatalf("%v %s", err, out)
			}
		}
	})
}
