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

// The attacker's r5: a named pipe planted where the logs are. verify and
// report must refuse it at once, never block in open waiting for a writer.
func TestAuditVerifyAndReportRefuseANamedPipeAsALog(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "audit.log.1")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Should a tool block in open, opening the other end unblocks it, so the
	// test ends and reports the hang instead of stalling the suite.
	t.Cleanup(func() {
		if w, err := os.OpenFile(fifo, os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})
	for _, tool := range []string{"verify", "report"} {
		done := make(chan string, 1)
		go func() {
			out, errOut, code := runCLI(t, "audit", tool, fifo)
			done <- strings.Join([]string{out, errOut, itoaCode(code)}, "\n")
		}()
		select {
		case got := <-done:
			if !strings.Contains(got, "named pipe, not a regular file") || strings.HasSuffix(got, "\n0") {
				t.Errorf("audit %s on a named pipe:\n%s", tool, got)
			}
		case <-time.After(20 * time.Second): // a hang, not a slow machine: refusing takes microseconds
			t.Errorf("audit %s blocks on a named pipe", tool)
			if w, err := os.OpenFile(fifo, os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
			<-done
		}
	}
}

// The writer refuses a named pipe as its log too, instead of blocking in
// open until a reader appears.
func TestAuditFileRefusesANamedPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "audit.log")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := audit.OpenFile(fifo, 0)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("OpenFile on a named pipe: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("OpenFile blocks on a named pipe")
		if r, err := os.OpenFile(fifo, os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
			r.Close()
		}
		<-done
	}
}

func itoaCode(code int) string { return string(rune('0' + code)) }
