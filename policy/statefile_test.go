package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStateFileThatIsANamedPipeFailsAtOnce: a versions.json that is a FIFO
// used to block os.ReadFile until a writer came, freezing every load.
func TestStateFileThatIsANamedPipeFailsAtOnce(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mkfifo(filepath.Join(dir, stateFile), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadMemory(dir); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "named pipe") || !strings.Contains(err.Error(), StatePath(dir)) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(30 * time.Second): // a guard against the hang, not a synchronisation
		// Unblock the reader so the test binary can exit.
		if f, err := os.OpenFile(filepath.Join(dir, stateFile), os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("reading a state file that is a named pipe blocked")
	}
}

// TestStateKeysInAnotherCaseAreRefused: encoding/json matched struct
// fields case-insensitively, so "IDS", "Version" or "APPROVED" read as the
// keys egressd writes. Version memory accepts only its own spelling.
func TestStateKeysInAnotherCaseAreRefused(t *testing.T) {
	d := "sha256:" + strings.Repeat("a", 64)
	record := `{"version":"1.0.0","digest":"` + d + `","approved":{"version":"1.0.0","digest":"` + d + `","entries":["erp.acme.example"]}}`
	good := `{"egressd_state":2,"ids":{"com.acme.erp":` + record + `},"folders":{"/srv/erp":{"id":"com.acme.erp","pending":{"id":"com.acme.erp2","version":"1.0.0","digest":"` + d + `"}}}}`
	if _, err := DecodeState([]byte(good)); err != nil {
		t.Fatalf("the state egressd writes: %v", err)
	}
	for _, swap := range [][2]string{
		{`"ids"`, `"IDS"`},
		{`"folders"`, `"Folders"`},
		{`"egressd_state"`, `"EGRESSD_STATE"`},
		{`{"version"`, `{"Version"`},
		{`"approved":{`, `"APPROVED":{`},
		{`"entries"`, `"Entries"`},
		{`{"id":"com.acme.erp",`, `{"\u0130d":"com.acme.erp",`},
		{`"pending"`, `"Pending"`},
	} {
		doc := strings.Replace(good, swap[0], swap[1], 1)
		if _, err := DecodeState([]byte(doc)); err == nil {
			t.Errorf("%s read as %s", swap[1], swap[0])
		}
	}
	first := `{"com.acme.erp":` + strings.Replace(record, `"digest"`, `"DIGEST"`, 1) + `}`
	if _, err := DecodeState([]byte(first)); err == nil {
		t.Error("first layout: DIGEST read as digest")
	}
}
