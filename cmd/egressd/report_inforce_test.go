package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReportJudgesUnusedEntriesByTheListInForceThen is f13g item 4: audit
// report read "unused entries" from the manifest as it is when the report
// runs. The traffic happened under [api.weather.example,
// then-unused.example]; the manifest was edited afterwards to list
// added-after.example instead, and the report called added-after.example
// unused (it was never in force) and said nothing of then-unused.example.
// The policy event now records the list in force, and the report judges
// each entry by it.
func TestReportJudgesUnusedEntriesByTheListInForceThen(t *testing.T) {
	dir := t.TempDir()
	manifest := func(hosts string) {
		os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"manifest_version":1,"id":"com.test.weather","version":"1.0.0","network":{"connect":[`+hosts+`]}}`), 0o600)
	}
	manifest(`"api.weather.example","then-unused.example"`)
	auditFile := filepath.Join(dir, "audit.log")
	cfg := filepath.Join(dir, "egressd.yaml")
	os.WriteFile(cfg, []byte("state_dir: "+filepath.Join(dir, "state")+"\nresolvers: [\"127.0.0.1:9\"]\naudit:\n  path: "+auditFile+"\nintegrations:\n  - manifest: .\n    listen: 127.0.0.1:0\n"), 0o600)
	var out, errb lockedBuffer
	sig := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() { done <- serve(context.Background(), []string{"--config", cfg}, &out, &errb, sig) }()
	listen := waitFor(t, &errb, `serving com.test.weather on (127\.0\.0\.1:\d+)`)[1]
	connectReason(t, listen, "api.weather.example")
	sig <- syscall.SIGTERM
	if code := <-done; code != 0 {
		t.Fatalf("serve exit %d: %s", code, errb.String())
	}
	if log, _ := os.ReadFile(auditFile); !strings.Contains(string(log), `"entries":["api.weather.example","then-unused.example"]`) {
		t.Fatalf("the policy event does not record the list in force:\n%s", log)
	}
	manifest(`"api.weather.example","added-after.example"`) // edited after the traffic, never loaded

	rep, errs, code := runCLI(t, "audit", "report", auditFile)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errs)
	}
	unused := rep[strings.Index(rep, "unused entries:"):]
	unused = unused[:strings.IndexByte(unused, '\n')]
	if !strings.Contains(unused, "then-unused.example") || strings.Contains(rep, "added-after.example") {
		t.Fatalf("unused entries are not those of the list in force then:\n%s", rep)
	}
}
