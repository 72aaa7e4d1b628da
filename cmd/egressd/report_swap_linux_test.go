package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/egressd/egressd/audit"
	"golang.org/x/sys/unix"
)

// swapOnFirstOpen renames with over path as soon as path is first opened
// (inotify IN_OPEN), as an attacker with write access to the log folder
// can: whatever opens path later reads the other file. done is closed once
// the swap is made.
func swapOnFirstOpen(t *testing.T, path, with string) (done <-chan struct{}) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer unix.Close(fd)
		buf := make([]byte, 4096)
		if _, err := unix.Read(fd, buf); err != nil {
			return
		}
		os.Rename(with, path)
	}()
	return ch
}

// TestReportOfALogSwappedAfterItsFirstOpenReportsWhatItVerified is issue
// 18's break 3 (f18b): audit report verified one open of the file and read
// another, so a log swapped in between (IN_OPEN, then rename) was reported
// under "log verified: intact" with the forged content: here, the refusal
// of the metadata address removed. The report now reads each file once and
// verifies the bytes it reports, so what it shows is what was verified,
// whenever the swap lands.
func TestReportOfALogSwappedAfterItsFirstOpenReportsWhatItVerified(t *testing.T) {
	var events []audit.Event
	for range 20000 { // a log long enough that verifying it outlasts the swap
		events = append(events, audit.Event{Kind: audit.Connect, Integration: "com.test.weather", Decision: "allow", Reason: "allowed", Host: "api.weather.example", Rule: "api.weather.example", Port: 443})
	}
	events = append(events, audit.Event{Kind: audit.Connect, Integration: "com.test.weather", Decision: "deny", Reason: "ip_literal", HostRaw: "169.254.169.254:443"})
	genuine := writeLog(t, events...)
	data, err := os.ReadFile(genuine)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if !strings.Contains(line, "169.254.169.254") {
			kept = append(kept, line)
		}
	}
	forged := filepath.Join(filepath.Dir(genuine), "forged.log")
	if err := os.WriteFile(forged, []byte(strings.Join(kept, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	done := swapOnFirstOpen(t, genuine, forged)
	out, errs, code := runCLI(t, "audit", "report", "--format", "json", "--manifest", t.TempDir(), genuine)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the report never opened the log")
	}
	if now, _ := os.ReadFile(genuine); strings.Contains(string(now), "169.254.169.254") {
		t.Fatal("the swap did not happen")
	}
	intact := strings.Contains(out, `"intact": true`)
	shown := strings.Contains(out, "169.254.169.254")
	if intact != shown || (intact && code != exitOK) {
		t.Fatalf("verdict intact=%v (exit %d) but the metadata refusal shown=%v: the report is not of the bytes it verified\n%s", intact, code, shown, errs)
	}
}
