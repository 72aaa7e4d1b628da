package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// realLog runs egressd serve in-process with a file audit log, sends real
// CONNECTs through it, rotates the log the logrotate way (rename, SIGUSR1),
// and stops it. It returns the files oldest first and the captured stderr,
// which holds the checkpoints.
func realLog(t *testing.T, keyed bool) (files []string, stderr string) {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"manifest_version":1,"id":"com.test.weather","version":"1.0.0","network":{"connect":["api.weather.example"]}}`), 0o600)
	auditFile := filepath.Join(dir, "audit.log")
	key := ""
	if keyed {
		os.WriteFile(filepath.Join(dir, "audit.key"), []byte("0123456789abcdef0123456789abcdef"), 0o600)
		key = "\n  key_file: " + filepath.Join(dir, "audit.key") + "\n  key_id: test-key-1"
	}
	// Version memory that knows the id: the log's lines are then those
	// these tests edit by position, with no warning about new memory.
	if _, errs, code := runCLI(t, "approve", "--yes", "--state", filepath.Join(dir, "state"), "--new-id", "--manifest", dir); code != 0 {
		t.Fatalf("approve --new-id: %s", errs)
	}
	cfg := filepath.Join(dir, "egressd.yaml")
	os.WriteFile(cfg, []byte("state_dir: "+filepath.Join(dir, "state")+"\nresolvers: [\"127.0.0.1:9\"]\naudit:\n  path: "+auditFile+key+"\nintegrations:\n  - manifest: .\n    listen: 127.0.0.1:0\n"), 0o600)
	var out, errb lockedBuffer
	sig := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() { done <- serve(context.Background(), []string{"--config", cfg}, &out, &errb, sig) }()
	listen := waitFor(t, &errb, `serving com.test.weather on (127\.0\.0\.1:\d+)`)[1]
	connect := func(host string) { connectReason(t, listen, host) }
	for i := 0; i < 3; i++ {
		connect("evil" + strconv.Itoa(i) + ".example")
	}
	connect("api.weather.example")
	os.Rename(auditFile, auditFile+".1")
	sig <- syscall.SIGUSR1
	waitFor(t, &lockedFile{path: auditFile}, `"action":"genesis"`)
	connect("169.254.169.254")
	connect("evil9.example")
	sig <- syscall.SIGTERM
	if code := <-done; code != 0 {
		t.Fatalf("serve exit %d: %s", code, errb.String())
	}
	return []string{auditFile + ".1", auditFile}, errb.String()
}

func verify(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, _, code := runCLI(t, append([]string{"audit", "verify"}, args...)...)
	return out, code
}

func readLines(t *testing.T, f string) []string {
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func writeLines(t *testing.T, f string, lines []string) {
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyIntactRotatedLog(t *testing.T) {
	files, _ := realLog(t, false)
	out, code := verify(t, files...)
	if code != 0 || !strings.HasPrefix(out, "intact: ") || !strings.Contains(out, "unkeyed (SHA-256)") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestVerifyCatchesTampering(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, files []string) []string
		want   string
	}{
		{"edit_one_byte", func(t *testing.T, files []string) []string {
			lines := readLines(t, files[0])
			lines[3] = strings.Replace(lines[3], "evil", "evIl", 1)
			writeLines(t, files[0], lines)
			return files
		}, "seq 4: the line's bytes do not match its hash: the line was edited"},
		{"delete_a_line", func(t *testing.T, files []string) []string {
			lines := readLines(t, files[0])
			writeLines(t, files[0], append(lines[:3], lines[4:]...))
			return files
		}, "seq jumps from 3 to 5: 1 line(s) deleted or moved"},
		{"swap_two_lines", func(t *testing.T, files []string) []string {
			lines := readLines(t, files[0])
			lines[3], lines[4] = lines[4], lines[3]
			writeLines(t, files[0], lines)
			return files
		}, "seq jumps from 3 to 5"},
		{"truncate_the_tail", func(t *testing.T, files []string) []string {
			lines := readLines(t, files[1])
			writeLines(t, files[1], lines[:len(lines)-2])
			return files
		}, "no clean-shutdown record and no continuation"},
		{"delete_a_rotated_file", func(t *testing.T, files []string) []string {
			return files[1:]
		}, "the chain continues from an earlier file that was not given"},
		{"cut_the_head", func(t *testing.T, files []string) []string {
			lines := readLines(t, files[0])
			writeLines(t, files[0], lines[2:])
			return files
		}, "the first file does not begin at a genesis record"},
		{"splice_a_line_after_the_shutdown", func(t *testing.T, files []string) []string {
			lines := readLines(t, files[1])
			writeLines(t, files[1], append(lines, lines[len(lines)-2]))
			return files
		}, "lines were appended to a closed chain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files, _ := realLog(t, false)
			out, code := verify(t, tc.tamper(t, files)...)
			if code != 1 || !strings.Contains(out, "BROKEN: ") || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want %q in:\n%s", code, tc.want, out)
			}
		})
	}
}

// rechain rewrites one line and recomputes every hash after it with plain
// SHA-256, as someone with write access and no key would.
func rechain(t *testing.T, files []string, file, line int, from, to string) {
	prev := ""
	for fi, f := range files {
		lines := readLines(t, f)
		for i, l := range lines {
			if fi == file && i == line {
				l = strings.Replace(l, from, to, 1)
			}
			body := l[:strings.LastIndex(l, `,"hash":"`)]
			if p := strings.Index(body, `,"prev":"`); p >= 0 {
				end := strings.Index(body[p+9:], `"`)
				body = body[:p+9] + prev + body[p+9+end:]
			}
			sum := sha256.Sum256([]byte(body))
			prev = hex.EncodeToString(sum[:])
			lines[i] = body + `,"hash":"` + prev + `"}`
		}
		writeLines(t, f, lines)
	}
}

func TestRecomputedUnkeyedChainIsCaughtOnlyByCheckpointsOrKey(t *testing.T) {
	files, stderr := realLog(t, false)
	rechain(t, files, 0, 3, "evil0.example", "benign.example")
	// Without a key or checkpoints the rewrite verifies: that is what an
	// unkeyed chain cannot prove, and verify says so.
	out, code := verify(t, files...)
	if code != 0 || !strings.Contains(out, "can be recomputed by whoever edits it") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	ckpt := filepath.Join(t.TempDir(), "stderr.log")
	os.WriteFile(ckpt, []byte(stderr), 0o600)
	out, code = verify(t, "--checkpoints", ckpt, files[0], files[1])
	if code != 1 || !strings.Contains(out, "differs from the checkpoint recorded for this chain and seq: the chain was rewritten") {
		t.Fatalf("checkpoints: exit %d:\n%s", code, out)
	}
}

func TestRecomputedKeyedChainIsCaughtByTheKey(t *testing.T) {
	files, _ := realLog(t, true)
	key := filepath.Join(filepath.Dir(files[0]), "audit.key")
	if out, code := verify(t, append([]string{"--key", key}, files...)...); code != 0 || !strings.Contains(out, "keyed (HMAC-SHA-256, key id test-key-1)") {
		t.Fatalf("intact keyed log: exit %d:\n%s", code, out)
	}
	rechain(t, files, 0, 3, "evil0.example", "benign.example")
	out, code := verify(t, append([]string{"--key", key}, files...)...)
	if code != 1 || !strings.Contains(out, "the line's bytes do not match its hash") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, code = verify(t, files...)
	if code != 1 || !strings.Contains(out, "pass its key to check the hashes") {
		t.Fatalf("without the key: exit %d:\n%s", code, out)
	}
}

var _ = time.Second

func TestFullDiskRefusesConnectionsAndLogVerifiesToTheFailure(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root; mounting a tmpfs needs it")
		}
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk")
	os.Mkdir(disk, 0o700)
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=8k"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	defer syscall.Unmount(disk, syscall.MNT_DETACH)
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"manifest_version":1,"id":"com.test.weather","version":"1.0.0","network":{"connect":["api.weather.example"]}}`), 0o600)
	auditFile := filepath.Join(disk, "audit.log")
	var out, errb lockedBuffer
	sig := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() {
		done <- serve(context.Background(), []string{"--manifest", dir, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--state", filepath.Join(dir, "state"), "--resolver", "127.0.0.1:9", "--audit-log", auditFile}, &out, &errb, sig)
	}()
	listen := waitFor(t, &errb, `serving com.test.weather on (127\.0\.0\.1:\d+)`)[1]
	admin := waitFor(t, &errb, `admin on (127\.0\.0\.1:\d+)`)[1]
	reason := ""
	for i := 0; i < 200 && reason != "audit_unavailable"; i++ {
		c, err := net.Dial("tcp", listen)
		if err != nil {
			t.Fatal(err)
		}
		// Distinct hosts, so no denial is folded: each one is a line.
		io.WriteString(c, "CONNECT evil"+strconv.Itoa(i)+".example:443 HTTP/1.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		reason = resp.Header.Get("X-Egress-Reason")
		c.Close()
	}
	if reason != "audit_unavailable" {
		t.Fatalf("a full disk never refused connections (last reason %q)", reason)
	}
	waitFor(t, &errb, `egressd: audit log unavailable: .*no space left on device; new connections are refused \(audit_unavailable\)`)
	resp, err := http.Get("http://" + admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(body), "audit log unavailable") {
		t.Fatalf("/readyz %d %s", resp.StatusCode, body)
	}
	sig <- syscall.SIGTERM
	<-done
	out2, code := verify(t, auditFile)
	if code != 1 || !regexp.MustCompile(`intact through seq [1-9]\d*`).MatchString(out2) {
		t.Fatalf("verify after a full disk: exit %d:\n%s", code, out2)
	}
}

func TestAuditReportAndSuggestOnARealLog(t *testing.T) {
	files, _ := realLog(t, false)
	out, errs, code := runCLI(t, append([]string{"audit", "report"}, files...)...)
	if code != 0 {
		t.Fatalf("report exit %d: %s", code, errs)
	}
	for _, want := range []string{"== com.test.weather (versions 1.0.0)", "not_allowlisted", "evil0.example", "ip_literal", "dns_error", "api.weather.example"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	out, _, code = runCLI(t, append([]string{"audit", "report", "--format", "json"}, files...)...)
	if code != 0 || !strings.Contains(out, `"id": "com.test.weather"`) {
		t.Fatalf("json report: exit %d %s", code, out)
	}
	out, _, code = runCLI(t, append([]string{"audit", "report", "--format", "html"}, files...)...)
	if code != 0 || !strings.HasPrefix(out, "<!DOCTYPE html>") {
		t.Fatalf("html report: exit %d", code)
	}
	out, _, code = runCLI(t, append([]string{"audit", "suggest", "--format", "sollar"}, files...)...)
	if code != 0 || !strings.Contains(out, `"connect": [`) || !strings.Contains(out, `"api.weather.example"`) || !strings.Contains(out, `"evil0.example"`) {
		t.Fatalf("suggest: exit %d\n%s", code, out)
	}
}
