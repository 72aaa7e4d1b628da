package main

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/egressd/egressd/audit"
)

// TestRunAuditLogRotatesAtItsBoundAndReopensOnSIGUSR1: run's audit log had no
// size bound (audit.max_size_mb was ignored) and no SIGUSR1 reopen, so a
// busy program grew one file without end. Refusals now fold into a few
// lines a second, so the volume here is honest traffic that is never
// folded: 1,500 allowed tunnels (a CONNECT and a TLS handshake each, an
// allow and a close line, about 1.1 kB), about 1.6 MB of lines, with the
// connection rate lifted; the bound is 1 MB, the least the config takes.
func TestRunAuditLogRotatesAtItsBoundAndReopensOnSIGUSR1(t *testing.T) {
	e := newSandboxEnv(t)
	const tunnels = 1500
	flood := `/usr/bin/python3 -c '
import os, socket, ssl, threading
proxy = os.environ["HTTPS_PROXY"].split("//")[-1].rstrip("/").rsplit(":", 1)
ctx = ssl.create_default_context(cafile="ca.pem")
def tunnel():
    s = socket.create_connection((proxy[0], int(proxy[1])))
    s.sendall(b"CONNECT api.allowed.example:` + e.port + ` HTTP/1.1\r\n\r\n")
    if not s.recv(4096).startswith(b"HTTP/1.1 200"):
        raise SystemExit("refused")
    ctx.wrap_socket(s, server_hostname="api.allowed.example").close()
def worker():
    for i in range(` + strconv.Itoa(tunnels/10) + `):
        tunnel()
workers = [threading.Thread(target=worker) for _ in range(10)]
[w.start() for w in workers]
[w.join() for w in workers]
' && echo flooded; read more`
	cmd := e.configured("audit:\n  max_size_mb: 1\nlimits:\n  connections_per_second: 1000000\n  burst: 1000000\n", flood)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "flooded" {
		t.Fatalf("the flood did not finish: %q", lines.Text())
	}
	rolled := waitForFiles(t, e.audit+".*", 1)
	// The log rolls within a second of reaching its bound (the audit
	// package checks once a second), so the file may hold that second's lines.
	if st, err := os.Stat(rolled[0]); err != nil || st.Size() < 1<<20 {
		t.Fatalf("rolled file %s: %v, want at least 1 MB", rolled[0], err)
	}
	// logrotate's convention: rename, then SIGUSR1; egressd continues at the path.
	if err := os.Rename(e.audit, e.audit+".renamed"); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGUSR1)
	waitForFiles(t, e.audit, 1)
	stdin.Write([]byte("more\n"))
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("egressd: %v", err)
	}
	if log := e.auditLog(); !strings.Contains(log, `"action":"stop"`) {
		t.Fatalf("the reopened file does not continue the chain:\n%s", log)
	}
	files := append(append(rolled, e.audit+".renamed"), e.audit)
	recs, err := audit.ReadFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	allowed := 0
	for _, r := range recs {
		if r.Event == string(audit.Connect) && r.Decision == "allow" {
			allowed++
		}
	}
	if allowed != tunnels {
		t.Fatalf("the files hold %d allowed tunnels, want %d", allowed, tunnels)
	}
	if out, errs, code := runCLI(t, append([]string{"audit", "verify"}, files...)...); code != 0 {
		t.Fatalf("verify %v: %d\n%s%s", files, code, out, errs)
	}
}

// waitForFiles waits until pattern matches at least n files, and returns
// them sorted.
func waitForFiles(t *testing.T, pattern string, n int) []string {
	deadline := time.Now().Add(30 * time.Second) // bounds a failure only
	for {
		m, _ := filepath.Glob(pattern)
		var files []string
		for _, f := range m {
			if !strings.HasSuffix(f, ".renamed") {
				files = append(files, f)
			}
		}
		if len(files) >= n {
			sort.Strings(files)
			return files
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 30 s", pattern)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// egressd run ignored audit.key_id from --config (serve honours it): the
// genesis said key_id=unnamed, so verify could not tell which key to use.
func TestRunNamesTheAuditKeyIdFromItsConfig(t *testing.T) {
	e := newSandboxEnv(t)
	key := filepath.Join(e.state, "audit.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	_, errOut, code := runCmd(t, e.configured("audit:\n  key_file: "+key+"\n  key_id: run-2026\n", "true"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	data, err := os.ReadFile(e.audit)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "key_id=run-2026 ") {
		t.Errorf("the genesis does not name the configured key id:\n%.600s", data)
	}
}
