package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/egressd/egressd/audit"
)

// writeLog writes events as a real chained audit log and returns its path.
func writeLog(t *testing.T, events ...audit.Event) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.log")
	f, err := audit.OpenFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.New(f, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := l.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	f.Close()
	return path
}

func TestReportSaysTriedNeverConnectedForAnEntryWhoseEveryAttemptFailed(t *testing.T) {
	files, _ := realLog(t, false) // api.weather.example only ever got dns_error
	dir := filepath.Dir(files[0])
	out, errs, code := runCLI(t, append([]string{"audit", "report", "--manifest", dir}, files...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "tried, never connected:  api.weather.example") || !strings.Contains(out, "dns_error ×1") {
		t.Fatalf("an entry that failed DNS is not reported as tried:\n%s", out)
	}
	if strings.Contains(out, "remove them from the manifest") {
		t.Fatalf("an entry that was tried is called unused:\n%s", out)
	}
}

func TestReportEscapesATerminalTitleAndClearInAPolicyDetail(t *testing.T) {
	hostile := "network.\x1b]0;owned\x07\x1b[2J\x1b[31mALL CLEAR"
	log := writeLog(t,
		audit.Event{Kind: audit.Policy, Integration: "com.test.weather", IntegrationVersion: "1.0.0\x1b[2J", Action: "kept_last_good", Err: hostile},
		audit.Event{Kind: audit.Connect, Integration: "com.test.weather", Decision: "deny", Reason: "not_allowlisted", Host: "evil.example"})
	out, errs, code := runCLI(t, "audit", "report", "--manifest", t.TempDir(), log)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.ContainsAny(out+errs, "\x1b\x07") {
		t.Fatalf("a control character reached the terminal:\n%q", out+errs)
	}
	if !strings.Contains(out, `\x1b]0;owned\x07\x1b[2J\x1b[31mALL CLEAR`) {
		t.Fatalf("the detail is not shown escaped:\n%s", out)
	}
}

func TestReportDoesNotOpenAFIFOTheLogNamesAsAManifest(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "manifest.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	log := writeLog(t, audit.Event{Kind: audit.Policy, Integration: "com.test.weather", Action: "loaded", Manifest: fifo})
	type result struct {
		out, errs string
		code      int
	}
	done := make(chan result, 1)
	go func() {
		out, errs, code := runCLI(t, "audit", "report", log)
		done <- result{out, errs, code}
	}()
	select {
	case r := <-done:
		if r.code != 0 || !strings.Contains(r.errs, "not a regular file") {
			t.Fatalf("exit %d:\n%s%s", r.code, r.out, r.errs)
		}
	case <-time.After(20 * time.Second):
		// Unblock the stuck reader so the test process can end.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatal("audit report blocked opening a FIFO the log named")
	}
}

func TestSuggestAppliesTheOperatorsWildcardDNSServices(t *testing.T) {
	log := writeLog(t, audit.Event{Kind: audit.Connect, Integration: "com.test.weather", Decision: "deny", Reason: "not_allowlisted", Host: "10-0-0-1.wild.example"},
		audit.Event{Kind: audit.Connect, Integration: "com.test.weather", Decision: "deny", Reason: "not_allowlisted", Host: "api.weather.example"})
	cfg := filepath.Join(t.TempDir(), "egressd.yaml")
	os.WriteFile(cfg, []byte("wildcard_dns_services: [wild.example]\nintegrations: []\n"), 0o600)
	out, errs, code := runCLI(t, "audit", "suggest", "--format", "sollar", "--config", cfg, log)
	if code != 0 || strings.Contains(out, "wild.example") || !strings.Contains(errs, "10-0-0-1.wild.example cannot be a manifest entry") || !strings.Contains(out, "api.weather.example") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}

func TestVerifyOfAFileOfManyRunsPrintsABoundedListOfChains(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	for range 50 {
		f, err := audit.OpenFile(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		l, err := audit.New(f, audit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		f.Close()
	}
	out, code := verify(t, path)
	if code != 0 || !strings.Contains(out, "in 50 chain(s)") || strings.Count(out, "\n  chain ") != 21 || !strings.Contains(out, "… and 29 more chain(s)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
