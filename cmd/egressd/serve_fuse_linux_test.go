package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// hungFUSE mounts a FUSE file system whose daemon never answers: /dev/fuse
// is opened and never read, so every request on the mount (a lookup, a
// stat, an open) waits in the kernel, uninterruptibly for egressd, before
// any check of the file can run. Cleanup detaches the mount and closes the
// device, which aborts the requests still waiting.
func hungFUSE(t *testing.T) string {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("/dev/fuse is required in CI: %v", err)
		}
		t.Skipf("no /dev/fuse: %v", err)
	}
	mnt := t.TempDir()
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", fd)
	if err := unix.Mount("egressd-test-hung", mnt, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		if os.Getenv("CI") == "true" {
			t.Fatalf("mounting FUSE (root) is required in CI: %v", err)
		}
		t.Skipf("cannot mount FUSE: %v", err)
	}
	t.Cleanup(func() {
		unix.Unmount(mnt, unix.MNT_DETACH)
		unix.Close(fd)
	})
	return mnt
}

// linkIntoHungFUSE replaces the folder's manifest.json, atomically, by a
// symbolic link into mnt, as the integration's author can.
func linkIntoHungFUSE(t *testing.T, folder, mnt string) {
	t.Helper()
	tmp := filepath.Join(folder, "manifest.json.new")
	if err := os.Symlink(filepath.Join(mnt, "manifest.json"), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(folder, "manifest.json")); err != nil {
		t.Fatal(err)
	}
}

// threadsWaitingOnFUSE counts pid's threads asleep in a FUSE request.
func threadsWaitingOnFUSE(t *testing.T, pid int) int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", pid))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, w := range tasks {
		if b, err := os.ReadFile(w); err == nil && (strings.Contains(string(b), "fuse") || strings.Contains(string(b), "request_wait")) {
			n++
		}
	}
	t.Logf("%d threads wait on the mount", n)
	return n
}

// TestServeReloadStuckOnAFUSEManifestKeepsEveryOtherReloadApplying is
// issue 17's FUSE attack: the hostile integration swaps its manifest for a
// link into a FUSE mount that never answers. The reload's read of it
// blocked in the kernel while holding the reload lock, so every later
// reload (the victim's narrowing) never applied, /readyz stayed 200, and
// SIGTERM was ignored. Now the read has a deadline: the hostile keeps its
// last good policy and is reported, the victim's narrowing applies, /readyz
// names the stuck read, and SIGTERM exits.
func TestServeReloadStuckOnAFUSEManifestKeepsEveryOtherReloadApplying(t *testing.T) {
	mnt := hungFUSE(t)
	f := newTwoIntegrations(t)
	sb := startServeBinary(t, f.cfg)
	waitFor(t, sb.stderr, `serving com\.test\.victim on`)
	waitFor(t, sb.stderr, `serving com\.test\.hostile on`)
	if got := unixConnectReason(t, f.victimSock, "old.v.example"); got != "dns_error" {
		t.Fatalf("before: old.v.example for the victim: %s, want dns_error (allowed)", got)
	}

	linkIntoHungFUSE(t, f.hostile, mnt)
	sb.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, sb.stderr, `reload: `+regexp.QuoteMeta(f.hostile)+`: reading [^\n]* did not finish within 1s[^\n]*the last good policy \(com\.test\.hostile 1\.0\.0\) stays in force`)
	waitFor(t, &lockedFile{path: f.audit}, `"integration":"com.test.hostile"[^\n]*"action":"kept_last_good"[^\n]*did not finish`)

	erpFolder(t, f.victim, "com.test.victim", "1.0.1", "v.example") // narrowing: old.v.example goes
	sb.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, &lockedFile{path: f.audit}, `"integration":"com.test.victim","integration_version":"1.0.1"[^\n]*"action":"loaded"`)
	if got := unixConnectReason(t, f.victimSock, "old.v.example"); got != "not_allowlisted" {
		t.Fatalf("the victim's narrowing did not apply while the hostile read is stuck: %s\n%s", got, sb.stderr.String())
	}
	if got := unixConnectReason(t, f.hostSock, "h.example"); got != "dns_error" {
		t.Fatalf("the hostile integration's last good policy: %s, want dns_error (allowed)", got)
	}
	code, body := readyz(t, sb.admin)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "manifest read not finished") || !strings.Contains(body, f.hostile) {
		t.Fatalf("/readyz while a manifest read is stuck: %d %s", code, body)
	}
	// More reloads start no more reads of the stuck path: the threads
	// waiting on the mount stay a handful (the manifest read, the
	// watcher's walk and read, the writable check), however many reloads.
	for n := 3; n <= 6; n++ {
		sb.cmd.Process.Signal(syscall.SIGHUP)
		waitFor(t, &lockedFile{path: f.audit}, fmt.Sprintf(`(?s)("integration":"com.test.hostile"[^\n]*"action":"kept_last_good".*){%d}`, n))
	}
	if n := threadsWaitingOnFUSE(t, sb.cmd.Process.Pid); n > 4 {
		t.Fatalf("%d threads wait on the mount after 6 reloads", n)
	}
	sb.stopsOnSIGTERM(t)
}

// TestServeStartingWithAFUSEHungManifestServesTheOthersAndStops: the same
// link in place at start. serve hung there, serving no one and ignoring
// SIGTERM. Now the hostile listener refuses every connection
// (manifest_not_loaded), the victim serves, and SIGTERM exits.
func TestServeStartingWithAFUSEHungManifestServesTheOthersAndStops(t *testing.T) {
	mnt := hungFUSE(t)
	f := newTwoIntegrations(t)
	linkIntoHungFUSE(t, f.hostile, mnt)
	sb := startServeBinary(t, f.cfg)
	waitFor(t, sb.stderr, `serving com\.test\.victim on`)
	waitFor(t, sb.stderr, `warning: `+regexp.QuoteMeta(f.hostile)+`: reading [^\n]* did not finish within 1s[^\n]*manifest_not_loaded`)
	if got := unixConnectReason(t, f.victimSock, "v.example"); got != "dns_error" {
		t.Fatalf("the victim: %s, want dns_error (allowed)\n%s", got, sb.stderr.String())
	}
	reason, body := refusalOn(t, f.hostSock, "h.example")
	if reason != "manifest_not_loaded" || !strings.Contains(body, "did not finish") {
		t.Fatalf("the hostile integration: %s %q", reason, body)
	}
	sb.stopsOnSIGTERM(t)
}

// TestServeStoppedWhileStartingStuckOnAFUSEManifestExitsAtOnce: SIGTERM
// while the start still waits for a manifest read (timeouts.manifest_read
// 30s) ends serve without waiting for the deadline.
func TestServeStoppedWhileStartingStuckOnAFUSEManifestExitsAtOnce(t *testing.T) {
	mnt := hungFUSE(t)
	f := newTwoIntegrations(t)
	cfg, err := os.ReadFile(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.cfg, strings.Replace(string(cfg), "manifest_read: 1s", "manifest_read: 30s", 1))
	linkIntoHungFUSE(t, f.hostile, mnt)
	sb := startServeBinary(t, f.cfg) // "admin on" comes before the manifests are read
	sb.stopsOnSIGTERM(t)             // within 20 s, below the 30 s deadline
	if strings.Contains(sb.stderr.String(), "serving ") {
		t.Fatalf("serve finished starting before SIGTERM; the test proves nothing:\n%s", sb.stderr.String())
	}
}
