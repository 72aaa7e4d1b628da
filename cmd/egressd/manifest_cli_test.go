package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runBinary runs the built egressd with args under a deadline that only
// guards against a regression that blocks: tests assert on the output.
func runBinary(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, egressdBinary(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("egressd %s blocked until killed; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), out.String(), errb.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSollarManifestWithSchemaVersionIsNotReadAsVoiceOS is issue 18.1 with
// the built binary: the store shows network.connect, so egressd must never
// enforce the VoiceOS permissions list hidden beside it.
func TestSollarManifestWithSchemaVersionIsNotReadAsVoiceOS(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "manifest.json")
	writeFile(t, manifest, `{"manifest_version":1,"schemaVersion":1,"id":"com.acme.erp","version":"2.4.1",
"network":{"connect":["api.acme.example"]},
"permissions":[{"kind":"network","domains":["evil.attacker.example"]}]}`)
	out, _, code := runBinary(t, "check", dir)
	if code != exitFail || strings.Contains(out, ": ok ") || !strings.Contains(out, manifest+": permissions: a voiceos network key in a sollar manifest.json") {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
	out, errs, code := runBinary(t, "explain", "--manifest", dir, "evil.attacker.example")
	if code == exitOK || strings.Contains(out, "allow") || !strings.Contains(errs, "the manifest has errors") {
		t.Fatalf("explain: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}

	// Without the VoiceOS list, schemaVersion is just a key Sollar does not
	// use: the list enforced is the one the store shows.
	writeFile(t, manifest, `{"manifest_version":1,"schemaVersion":1,"id":"com.acme.erp","version":"2.4.1","network":{"connect":["api.acme.example"]}}`)
	out, _, code = runBinary(t, "check", dir)
	if code != exitOK || !strings.Contains(out, "ok com.acme.erp 2.4.1 (sollar) entries: api.acme.example ") {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
	if out, _, code = runBinary(t, "explain", "--manifest", dir, "evil.attacker.example"); code != exitFail || !strings.HasPrefix(out, "deny not_allowlisted") {
		t.Fatalf("explain evil: exit %d\n%s", code, out)
	}
	if out, _, code = runBinary(t, "explain", "--manifest", dir, "api.acme.example"); code != exitOK || !strings.HasPrefix(out, "allow allowed") {
		t.Fatalf("explain api: exit %d\n%s", code, out)
	}
}

// TestCheckOnANamedPipeReturnsAtOnce is issue 18.3: a FIFO as the manifest,
// the folder's manifest or the config used to block check in open(2).
func TestCheckOnANamedPipeReturnsAtOnce(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "manifest.json"), filepath.Join(dir, "egressd.yaml")} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(filepath.Join(dir, "manifest.json"), filepath.Join(dir, "link.json"))
	for _, target := range []string{dir, filepath.Join(dir, "manifest.json"), filepath.Join(dir, "link.json")} {
		out, _, code := runBinary(t, "check", target)
		if code != exitFail || !strings.Contains(out, ": is a named pipe, not a regular file") {
			t.Fatalf("check %s: exit %d\n%s", target, code, out)
		}
	}
	out, _, code := runBinary(t, "check", "--config", filepath.Join(dir, "egressd.yaml"))
	if code != exitFail || !strings.Contains(out, "egressd.yaml: is a named pipe, not a regular file") {
		t.Fatalf("check --config: exit %d\n%s", code, out)
	}
}

// hostileKey is issue 18.4's key: it retitles the terminal, clears it and
// paints a verdict in red.
const hostileKey = "\x1b]0;pwned\x07\x1b[2J\x1b[31mALL CLEAR"

// TestCheckEscapesTerminalControlsFromManifestKeys is issue 18.4: no byte
// of a hostile key reaches the terminal as a control, while --json keeps
// the key exact for machines.
func TestCheckEscapesTerminalControlsFromManifestKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "app\x1b[2J")
	os.Mkdir(dir, 0o755)
	key, _ := json.Marshal(hostileKey)
	writeFile(t, filepath.Join(dir, "manifest.json"), `{"manifest_version":1,"id":"com.a.b","version":"1.0.0","network":{"connect":[],`+string(key)+`:1}}`)
	out, _, code := runBinary(t, "check", dir)
	if code != exitFail || strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `app\x1b[2J/manifest.json: network.\x1b]0;pwned\x07\x1b[2J\x1b[31mALL CLEAR: key holds control character U+001B`) {
		t.Fatalf("check: exit %d\n%q", code, out)
	}
	out, errs, code := runBinary(t, "explain", "--manifest", dir, "a.example.com")
	if code == exitOK || strings.ContainsAny(out+errs, "\x1b\x07") || !strings.Contains(errs, `network.\x1b]0;pwned`) {
		t.Fatalf("explain: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}

	// A newline in a key cannot forge a line of its own.
	forged := filepath.Join(t.TempDir(), "manifest.json")
	writeFile(t, forged, `{"manifest_version":1,"id":"com.a.b","version":"1.0.0","network":{"connect":[],"x\n`+forged+`: ok com.a.b 1.0.0 (sollar) entries: evil.example":1}}`)
	for _, args := range [][]string{{"check", forged}, {"explain", "--manifest", forged, "evil.example"}} {
		out, errs, _ := runBinary(t, args...)
		for _, line := range strings.Split(out+errs, "\n") {
			if strings.HasPrefix(line, forged+": ok") {
				t.Fatalf("%s printed a forged line:\n%s%s", args[0], out, errs)
			}
		}
	}

	out, _, _ = runBinary(t, "check", "--json", dir)
	var reports []checkReport
	if err := json.Unmarshal([]byte(out), &reports); err != nil || len(reports) != 1 || !strings.HasPrefix(reports[0].Errors[0], "network."+hostileKey+": key holds control character U+001B") {
		t.Fatalf("check --json: %v %q", err, out)
	}
}

// TestServeListenFlagRefusesEveryInterface is issue 13.6: --listen took
// 0.0.0.0 although the config file refuses it. The flag goes through the
// same check as the file.
func TestServeListenFlagRefusesEveryInterface(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", "[::]:0", ":0", "[::ffff:0.0.0.0]:0"} {
		t.Run(listen, func(t *testing.T) {
			var stdout, stderr lockedBuffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sig := make(chan os.Signal, 1)
			sig <- syscall.SIGTERM // should it start after all, it stops at once
			code := serve(ctx, []string{"--manifest", "../../configs/examples/coffee-tracker", "--listen", listen, "--state", t.TempDir(), "--resolver", "127.0.0.1:9"}, &stdout, &stderr, sig)
			if code != exitUsage || !strings.Contains(stderr.String(), "--listen: ") || !strings.Contains(stderr.String(), "every interface") || strings.Contains(stderr.String(), "serving") {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
		})
	}
}

// writeIntegration writes a Sollar manifest with id into dir/name.
func writeIntegration(t *testing.T, dir, name, id string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	os.MkdirAll(p, 0o755)
	writeFile(t, filepath.Join(p, "manifest.json"), `{"manifest_version":1,"id":"`+id+`","version":"1.0.0","network":{"connect":["api.example.com"]}}`)
	return p
}

// TestCheckConfigFindsTwoIntegrationsWithOneID (issue 13): check --config
// said ok for a config serve refuses at start.
func TestCheckConfigFindsTwoIntegrationsWithOneID(t *testing.T) {
	dir := t.TempDir()
	a, b := writeIntegration(t, dir, "a", "com.acme.erp"), writeIntegration(t, dir, "b", "com.acme.erp")
	cfg := filepath.Join(dir, "egressd.yaml")
	writeFile(t, cfg, `state_dir: `+filepath.Join(dir, "state")+`
resolvers: ["127.0.0.1:9"]
audit: {path: `+filepath.Join(dir, "audit.log")+`}
integrations:
  - {manifest: a, listen: "127.0.0.1:0"}
  - {manifest: b, listen: "127.0.0.1:0"}
`)
	out, _, code := runCLI(t, "check", "--config", cfg)
	if code != exitFail || strings.Contains(out, "ok config") || !strings.Contains(out, cfg+": "+b+": id com.acme.erp is already served from "+a) {
		t.Fatalf("check --config: exit %d\n%s", code, out)
	}
	var stdout, stderr lockedBuffer
	if code := serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, nil); code != exitFail || !strings.Contains(stderr.String(), "ids must be unique") {
		t.Fatalf("serve accepted what check refused: exit %d\n%s", code, stderr.String())
	}
}

// TestCheckConfigWarnsAboutAllowPrivateWiderThanADevExemption (issue 13):
// allow_private [0.0.0.0/0] lifts every denied range, metadata included.
func TestCheckConfigWarnsAboutAllowPrivateWiderThanADevExemption(t *testing.T) {
	dir := t.TempDir()
	writeIntegration(t, dir, "a", "com.acme.a")
	cases := []struct {
		ranges string
		warn   string
	}{
		{"[0.0.0.0/0]", "allow_private 0.0.0.0/0 is wider than a dev exemption"},
		{"[\"::/0\"]", "allow_private ::/0 is wider than a dev exemption"},
		{"[8.0.0.0/6]", "allow_private 8.0.0.0/6 is wider than a dev exemption"},
		{"[169.254.0.0/16]", "allow_private 169.254.0.0/16 reaches the cloud metadata address 169.254.169.254"},
		{"[127.0.0.0/8, 10.1.0.0/16, \"fd00:1::/64\"]", ""},
	}
	for _, tc := range cases {
		t.Run(tc.ranges, func(t *testing.T) {
			cfg := filepath.Join(dir, "egressd.yaml")
			writeFile(t, cfg, "integrations:\n  - {manifest: a, listen: \"127.0.0.1:0\", allow_private: "+tc.ranges+"}\n")
			out, _, code := runCLI(t, "check", "--config", cfg)
			if code != exitOK || !strings.Contains(out, "ok config, 1 integrations") {
				t.Fatalf("exit %d\n%s", code, out)
			}
			if got := strings.Contains(out, "warning: "); got != (tc.warn != "") || !strings.Contains(out, tc.warn) {
				t.Fatalf("want warning %q in\n%s", tc.warn, out)
			}
		})
	}
}

// TestCheckJSONWithABrokenConfigIsStillJSON: the config's problems used to
// be printed as text into the JSON stream.
func TestCheckJSONWithABrokenConfigIsStillJSON(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "egressd.yaml")
	writeFile(t, cfg, "integrations:\n  - manifest: x\n    listen: 0.0.0.0:3128\n")
	out, _, code := runCLI(t, "check", "--json", "--config", cfg, "../../configs/examples/acme-erp")
	var reports []checkReport
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if code != exitFail || len(reports) != 2 || reports[0].File != cfg || reports[0].Valid || reports[0].Format != "config" ||
		!strings.HasPrefix(reports[0].Errors[0], "integrations[0].listen: listening on every interface") || !reports[1].Valid {
		t.Fatalf("exit %d: %+v", code, reports)
	}
}
