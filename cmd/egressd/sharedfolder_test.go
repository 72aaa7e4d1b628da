package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// betaManifest is a Sollar manifest.json for com.t.beta listing only
// api.beta.example, written beside a folder's voiceos.integration.json.
const betaManifest = `{"manifest_version":1,"id":"com.t.beta","version":"1.0.0","network":{"connect":["api.beta.example"]}}`

// TestRunManifestJSONBesideVoiceOSManifestDoesNotRunUnderItsApprovedList
// is round 9's b2: a folder holding voiceos.integration.json (alpha) and
// manifest.json (beta) is one place, so "--manifest FOLDER/manifest.json"
// after alpha ran was taken for alpha renamed: beta ran under alpha's
// approved list and its CONNECTs were logged as alpha's. A folder holds
// one integration by those names: naming either file is a start error of
// one line that names both files, and nothing runs.
func TestRunManifestJSONBesideVoiceOSManifestDoesNotRunUnderItsApprovedList(t *testing.T) {
	e := newSandboxEnv(t)
	out, errs, code := e.run(`echo alpha ran`) // alpha, alone in its folder: approved
	if code != 0 || out != "alpha ran\n" {
		t.Fatalf("alpha: exit %d\n%s\n%s", code, out, errs)
	}
	beta := filepath.Join(e.dir, "manifest.json")
	if err := os.WriteFile(beta, []byte(betaManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{beta, filepath.Join(e.dir, "voiceos.integration.json")} {
		out, errs, code = e.runManifestFile(file, `echo program ran`)
		lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
		if code == 0 || out != "" || len(lines) != 1 || !strings.Contains(errs, "voiceos.integration.json") ||
			!strings.Contains(errs, "holds both voiceos.integration.json and manifest.json") || mixesIdentities(errs) {
			t.Fatalf("--manifest %s: exit %d\nstdout:\n%s\nstderr:\n%s", file, code, out, errs)
		}
	}
}

// TestServeEntrySwitchedToManifestJSONBesideVoiceOSManifestIsRefused is
// b2 served: the config entry for alpha's voiceos.integration.json is
// switched to the manifest.json beside it (beta) and serve reloads. The
// entry is refused as any entry whose manifest cannot be loaded (the
// audit log says why, naming both files), and beta is never taken for
// alpha with a changed id nor served with alpha's list.
func TestServeEntrySwitchedToManifestJSONBesideVoiceOSManifestIsRefused(t *testing.T) {
	k := newTakeover(t)
	os.Remove(filepath.Join(k.dir, "a", "manifest.json"))
	alpha := `{"schemaVersion":1,"id":"com.t.alpha","version":"1.0.0",
	"runtime":{"kind":"local-mcp","command":"sh","args":["run.sh"]},"permissions":[{"kind":"network","domains":["secret.alpha.example"]}]}`
	if err := os.WriteFile(filepath.Join(k.dir, "a", "voiceos.integration.json"), []byte(alpha), 0o600); err != nil {
		t.Fatal(err)
	}
	entry := func(file string) {
		doc := "state_dir: " + k.state + "\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: " + k.auditFile + "}\nintegrations:\n" +
			"  - manifest: " + filepath.Join(k.dir, "a", file) + "\n    listen: unix:" + k.sockA + "\n"
		if err := os.WriteFile(k.cfg, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	entry("voiceos.integration.json")
	stderr, stop := k.serve(t)
	defer stop()
	waitFor(t, stderr, `serving com\.t\.alpha on unix:`)

	if err := os.WriteFile(filepath.Join(k.dir, "a", "manifest.json"), []byte(betaManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	entry("manifest.json")
	k.sig <- syscall.SIGHUP
	log := &lockedFile{path: k.auditFile}
	waitFor(t, log, `"event":"policy",[^\n]*"action":"failed"[^\n]*holds both voiceos\.integration\.json and manifest\.json`)
	if c, err := net.Dial("unix", k.sockA); err == nil { // alpha's listener, until it closes
		defer c.Close()
		io.WriteString(c, "CONNECT api.beta.example:443 HTTP/1.1\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil && resp.StatusCode != http.StatusForbidden {
			t.Fatalf("CONNECT api.beta.example on the switched entry: %s %s", resp.Status, resp.Header.Get("X-Egress-Reason"))
		}
	}
	if strings.Contains(stderr.String(), "changed its id") || strings.Contains(log.String(), "changed its id") {
		t.Fatalf("beta was taken for alpha renamed:\n%s", stderr.String())
	}
}
