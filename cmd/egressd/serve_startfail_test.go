package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeThatCannotOpenAListenerEndsItsAuditLogCleanly is round 27's
// f9: a serve whose second listener's address is in use exited 1 after
// writing its genesis, policy and listening events but no shutdown
// record, so its honest log verified as truncated ("or the writer is
// still running") forever. Every exit after the audit log opened closes
// it: the listener case and the admin endpoint's.
func TestServeThatCannotOpenAListenerEndsItsAuditLogCleanly(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dir := t.TempDir()
	for _, f := range []string{"a", "b"} {
		os.MkdirAll(filepath.Join(dir, f), 0o755)
		writeFile(t, filepath.Join(dir, f, "manifest.json"), `{"manifest_version":1,"id":"com.test.`+f+`","version":"1.0.0","network":{"connect":["`+f+`.example"]}}`)
	}
	for name, tail := range map[string]string{
		"listener": "  - manifest: " + filepath.Join(dir, "b") + "\n    listen: " + held.Addr().String() + "\n",
		"admin":    "admin: " + held.Addr().String() + "\n",
	} {
		cfg, logPath := filepath.Join(dir, name+".yaml"), filepath.Join(dir, name+".log")
		writeFile(t, cfg, "state_dir: "+filepath.Join(dir, "state-"+name)+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+logPath+", checkpoints: none}\n"+
			"integrations:\n  - manifest: "+filepath.Join(dir, "a")+"\n    listen: 127.0.0.1:0\n"+tail)
		var stdout, stderr lockedBuffer
		if code := serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, make(chan os.Signal, 1)); code != exitFail {
			t.Fatalf("%s in use: serve exit %d, want 1:\n%s", name, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), held.Addr().String()) {
			t.Errorf("%s in use: the refusal does not name the address:\n%s", name, stderr.String())
		}
		out, errs, code := runCLI(t, "audit", "verify", logPath)
		if code != exitOK || !strings.HasPrefix(out, "intact:") {
			t.Errorf("%s in use: the log serve left does not verify (exit %d):\n%s%s", name, code, out, errs)
		}
	}
}
