package safefile

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readWithGuard runs read in a goroutine and fails the test, instead of
// hanging the suite, if it blocks: the guard is for a regression only, the
// assertion is on the error.
func readWithGuard(t *testing.T, read func() error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- read() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		t.Fatal("the read blocked")
		return nil
	}
}

func TestReadRegularRefusesAFIFOWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "manifest.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	os.Symlink(fifo, link)
	for _, p := range []string{fifo, link} {
		err := readWithGuard(t, func() error { _, err := ReadRegular(p, 1<<20); return err })
		if err == nil || err.Error() != p+": is a named pipe, not a regular file" {
			t.Fatalf("ReadRegular(%s) = %v", p, err)
		}
	}
}

func TestReadRegularRefusesDevicesFoldersAndLargeFiles(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, make([]byte, 101), 0o600)
	cases := []struct{ path, want string }{
		{"/dev/zero", "/dev/zero: is a character device, not a regular file"},
		{dir, dir + ": is a folder, not a regular file"},
		{big, big + ": larger than 100 bytes"},
		{filepath.Join(dir, "nope"), "no such file or directory"},
	}
	for _, tc := range cases {
		if _, err := ReadRegular(tc.path, 100); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("ReadRegular(%s) = %v, want %q", tc.path, err, tc.want)
		}
	}
	small := filepath.Join(dir, "small.json")
	os.WriteFile(small, []byte("{}"), 0o600)
	if data, err := ReadRegular(small, 100); err != nil || string(data) != "{}" {
		t.Fatalf("ReadRegular = %q, %v", data, err)
	}
}

func TestReadDirRefusesAFIFOWithoutBlocking(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "integrations")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	err := readWithGuard(t, func() error { _, err := ReadDir(fifo); return err })
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("ReadDir = %v", err)
	}
}

// TestAKernelPseudoFileIsNotARegularFile is issue 17's seventh attacker:
// a manifest linked to /proc/kmsg (regular and empty by its stat) blocked
// the loader until the kernel logged a megabyte, freezing serve's start
// and every later reload. Files of procfs and sysfs are refused at once.
func TestAKernelPseudoFileIsNotARegularFile(t *testing.T) {
	for _, p := range []string{"/proc/self/status", "/proc/kmsg", "/sys/kernel/uevent_seqnum"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if _, err := ReadRegular(p, 1<<20); err == nil || !strings.Contains(err.Error(), "of the kernel's") {
			t.Errorf("ReadRegular(%s): %v", p, err)
		}
		if f, err := OpenRegular(p); err == nil {
			f.Close()
			t.Errorf("OpenRegular(%s) opened it", p)
		}
	}
}
