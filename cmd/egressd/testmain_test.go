package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMain removes the egressd binaries the tests build (22 MB each) when the
// tests end, and first the ones left by test processes that were killed
// before they could: each build folder names the process that made it.
func TestMain(m *testing.M) {
	removeOrphanBinDirs()
	leftByTests := createdByTests(hostUIDRecordFolders...)
	code := m.Run()
	for _, dir := range leftByTests {
		os.RemoveAll(dir)
	}
	for _, bin := range []string{releaseBin, hookedBin, probeBin} {
		if bin != "" {
			os.RemoveAll(filepath.Dir(bin))
		}
	}
	os.Exit(code)
}

// hostUIDRecordFolders are what a root "egressd run" creates on the host
// beside its state: the host-wide record of sandbox uids (sandbox's
// hostUIDFolder) and the folder that holds it, parent first.
var hostUIDRecordFolders = []string{"/var/lib/egressd", "/var/lib/egressd/host-uids"}

// createdByTests returns those of dirs that do not exist yet: the run
// tests will create them, and TestMain removes them afterwards, so the
// suite leaves the host as it found it. One that existed (egressd in use
// on this machine) is left alone; its entries for the tests' state
// folders are dropped when those folders are gone.
func createdByTests(dirs ...string) []string {
	for i, d := range dirs {
		if _, err := os.Lstat(d); os.IsNotExist(err) {
			return dirs[i : i+1] // removing the first missing one removes those below it
		}
	}
	return nil
}

// binDirPrefix is the temporary folder pattern for the built binary:
// egressd-bin-PID-RANDOM.
func binDirPrefix() string { return fmt.Sprintf("egressd-bin-%d-", os.Getpid()) }

// removeOrphanBinDirs removes build folders whose process is gone.
func removeOrphanBinDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "egressd-bin-*-*"))
	for _, d := range dirs {
		pid, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(d), "egressd-bin-"), "-")
		if n, err := strconv.Atoi(pid); !ok || err != nil || n <= 0 {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); os.IsNotExist(err) {
			os.RemoveAll(d)
		}
	}
}

// TestBuiltBinaryFoldersAreRemovedAtExit runs this test binary as a child
// that stands in for a build (it sets the binary's path as egressdBinary
// does, without the 20-second build), and checks that the child's build
// folder, and one left by a killed process, are gone when it exits.
func TestBuiltBinaryFoldersAreRemovedAtExit(t *testing.T) {
	if dir := os.Getenv("EGRESSD_TEST_FAKE_BUILD"); dir != "" {
		releaseBin = filepath.Join(dir, "egressd")
		os.WriteFile(releaseBin, []byte("stands in for the build"), 0o755)
		return
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	orphan, err := os.MkdirTemp("", fmt.Sprintf("egressd-bin-%d-", dead.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(orphan)
	child := exec.Command(os.Args[0], "-test.run=^TestBuiltBinaryFoldersAreRemovedAtExit$", "-test.count=1")
	own, err := os.MkdirTemp("", "egressd-bin-child-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(own)
	child.Env = append(os.Environ(), "EGRESSD_TEST_FAKE_BUILD="+own)
	if out, err := child.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, d := range []string{own, orphan} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is left behind after the tests (%v)", d, err)
		}
	}
}
