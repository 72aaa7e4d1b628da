package main

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildRelease builds the binary the way "make release" does.
func buildRelease(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "egressd")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=test-release", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// unitExecStart reads ExecStart= from the unit file.
func unitExecStart(t *testing.T, unit string) []string {
	data, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ExecStart=(.*)$`).FindStringSubmatch(string(data))
	if m == nil {
		t.Fatalf("%s has no ExecStart", unit)
	}
	return strings.Fields(m[1])
}

// TestReleaseBinaryBehavesAsTheUnitExpects starts the release binary with
// the unit's ExecStart (binary and config paths swapped for the test's),
// with a fake NOTIFY_SOCKET, and checks Type=notify readiness, ExecReload's
// SIGHUP, and SIGTERM's drain and clean exit.
func TestReleaseBinaryBehavesAsTheUnitExpects(t *testing.T) {
	bin := buildRelease(t)
	if out, _ := exec.Command(bin, "version").Output(); string(out) != "egressd test-release\n" {
		t.Fatalf("version stamp: %q", out)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "weather"), 0o755)
	os.WriteFile(filepath.Join(dir, "weather", "manifest.json"), []byte(`{"manifest_version":1,"id":"com.test.weather","version":"1.0.0","network":{"connect":["api.weather.example"]}}`), 0o600)
	cfg := filepath.Join(dir, "egressd.yaml")
	os.WriteFile(cfg, []byte(`state_dir: `+filepath.Join(dir, "state")+`
admin: 127.0.0.1:0
resolvers: ["127.0.0.1:9"]
audit: {path: `+filepath.Join(dir, "audit.log")+`}
timeouts: {drain: 2s}
integrations:
  - manifest: weather
    listen: unix:`+filepath.Join(dir, "weather.sock")+`
`), 0o600)

	notifyPath := filepath.Join(dir, "notify.sock")
	notifySock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notifySock.Close()
	notes := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := notifySock.Read(buf)
			if err != nil {
				close(notes)
				return
			}
			notes <- string(buf[:n])
		}
	}()
	expectNote := func(want string) {
		t.Helper()
		select {
		case got := <-notes:
			if !strings.Contains(got, want) {
				t.Fatalf("sd_notify %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no sd_notify %q", want)
		}
	}

	args := unitExecStart(t, "../../systemd/egressd.service")
	if args[0] != "/usr/bin/egressd" || strings.Join(args[1:], " ") != "serve --config /etc/egressd/egressd.yaml" {
		t.Fatalf("unexpected ExecStart %q", args)
	}
	cmd := exec.Command(bin, "serve", "--config", cfg)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notifyPath)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var admin string
	for admin == "" {
		select {
		case l := <-lines:
			if m := regexp.MustCompile(`admin on (\S+)`).FindStringSubmatch(l); m != nil {
				admin = m[1]
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no admin address")
		}
	}
	expectNote("READY=1")
	resp, err := http.Get("http://" + admin + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/readyz after READY=1: %v %v", resp, err)
	}
	if st, err := os.Stat(filepath.Join(dir, "weather.sock")); err != nil || st.Mode().Perm() != 0o660 {
		t.Fatalf("unix listener: %v", err)
	}

	cmd.Process.Signal(syscall.SIGHUP) // ExecReload
	expectNote("RELOADING=1")
	expectNote("READY=1")

	cmd.Process.Signal(syscall.SIGTERM)
	expectNote("STOPPING=1")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(40 * time.Second): // TimeoutStopSec
		t.Fatal("did not stop within TimeoutStopSec")
	}
	if _, err := os.Stat(filepath.Join(dir, "weather.sock")); !os.IsNotExist(err) {
		t.Fatal("unix socket left behind")
	}
	audit, _ := os.ReadFile(filepath.Join(dir, "audit.log"))
	if !strings.Contains(string(audit), `"action":"drain"`) || !strings.HasSuffix(strings.TrimSpace(string(audit)), `"}`) || !strings.Contains(string(audit), `"action":"shutdown"`) {
		t.Fatalf("audit log lacks drain/shutdown:\n%s", audit)
	}
}
