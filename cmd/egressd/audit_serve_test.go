package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serveProcess is a real "egressd serve" process serving com.test.weather
// with a file audit log; its stderr holds the checkpoints.
type serveProcess struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	listen string
	done   chan error
}

// serveDir writes the weather manifest and a config whose audit log is
// dir/audit.log (auditExtra is appended to the audit: block) and returns
// the config's path.
func serveDir(t *testing.T, dir, auditExtra string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), weatherManifest("1.0.0", `"api.weather.example"`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "egressd.yaml")
	body := "state_dir: " + filepath.Join(dir, "state") + "\nresolvers: [\"127.0.0.1:9\"]\naudit:\n  path: " + filepath.Join(dir, "audit.log") + auditExtra + "\nintegrations:\n  - manifest: .\n    listen: 127.0.0.1:0\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func startServeProcess(t *testing.T, cfg string) *serveProcess {
	t.Helper()
	sp := &serveProcess{stderr: &lockedBuffer{}, done: make(chan error, 1)}
	sp.cmd = exec.Command(egressdBinary(t), "serve", "--config", cfg)
	sp.cmd.Dir = filepath.Dir(cfg)
	sp.cmd.Stderr = sp.stderr
	if err := sp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { sp.done <- sp.cmd.Wait() }()
	t.Cleanup(func() {
		if sp.cmd.ProcessState == nil {
			sp.cmd.Process.Kill()
			<-sp.done
		}
	})
	sp.listen = waitFor(t, sp.stderr, `serving com.test.weather on (127\.0\.0\.1:\d+)`)[1]
	return sp
}

// stop sends SIGTERM and requires a clean exit.
func (sp *serveProcess) stop(t *testing.T) {
	t.Helper()
	sp.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-sp.done:
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, sp.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
}

func TestSIGUSR1WithoutARenameKeepsLoggingToTheSameFile(t *testing.T) {
	dir := t.TempDir()
	sp := startServeProcess(t, serveDir(t, dir, ""))
	auditFile := filepath.Join(dir, "audit.log")
	connectReason(t, sp.listen, "evil0.example")
	sp.cmd.Process.Signal(syscall.SIGUSR1)
	// Either the chain continues in the same file or serve says why not.
	waitFor(t, multiSource{&lockedFile{path: auditFile}, sp.stderr}, `(?s)"action":"genesis".*"action":"genesis"|audit reopen: .*`)
	connectReason(t, sp.listen, "evil1.example")
	sp.stop(t)
	if strings.Contains(sp.stderr.String(), "audit reopen") {
		t.Fatalf("SIGUSR1 without a rename failed:\n%s", sp.stderr.String())
	}
	log, _ := os.ReadFile(auditFile)
	if !strings.Contains(string(log), `"host":"evil1.example"`) {
		t.Fatalf("the connection after SIGUSR1 is not in the log:\n%s", log)
	}
	if out, code := verify(t, auditFile); code != 0 {
		t.Fatalf("verify after SIGUSR1 without a rename: exit %d\n%s", code, out)
	}
}

// multiSource matches over several sources at once.
type multiSource []interface{ String() string }

func (m multiSource) String() string {
	var b strings.Builder
	for _, s := range m {
		b.WriteString(s.String())
		b.WriteString("\n")
	}
	return b.String()
}
