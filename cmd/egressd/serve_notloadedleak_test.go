package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestAManifestLinkedToARootOnlyFileDoesNotShowItsValuesToTheIntegration
// is issue 17's confused deputy: serve runs as root and reads manifests
// with root's rights. An integration (another uid, owning its folder)
// linked its manifest to a root-only JSON file; its own listener's 403
// manifest_not_loaded then quoted the file's values ("id: …
// (\"sk_live_ROOTONLY/SECRET\")"), so the integration read fields of a
// file it cannot read. Now the 403 (body and headers) and /readyz name the
// class and point to egressd check and the operator's log; stderr and the
// audit log keep the full message.
func TestAManifestLinkedToARootOnlyFileDoesNotShowItsValuesToTheIntegration(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test runs as root in CI: it is about what root reads for others")
		}
		t.Skip("needs root")
	}
	const secret, secretVersion = "sk_live_ROOTONLY/SECRET", "TOPSECRET-42"
	f := newTwoIntegrations(t)
	private := filepath.Join(f.dir, "rootonly")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	secretFile := filepath.Join(private, "secret.json")
	writeFile(t, secretFile, `{"manifest_version":1,"id":"`+secret+`","version":"`+secretVersion+`","network":{"connect":["h.example"]}}`)
	if err := os.Chmod(secretFile, 0o600); err != nil {
		t.Fatal(err)
	}
	// The integration's own uid owns its folder and makes the link, as it can.
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	if err := os.Chown(f.hostile, uid, gid); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(f.hostile, "manifest.json")
	os.Remove(manifest)
	if err := os.Symlink(secretFile, manifest); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(manifest, uid, gid); err != nil {
		t.Fatal(err)
	}

	sv := serveInProcess(t, f.cfg)
	waitFor(t, &sv.stderr, `refusing every connection for `+regexp.QuoteMeta(f.hostile)+` on unix:`)
	leaks := func(s string) bool {
		return strings.Contains(s, "ROOTONLY") || strings.Contains(s, "SECRET") || strings.Contains(s, secretVersion)
	}
	for _, host := range []string{"h.example", "x.example"} {
		resp, body := connectOn(t, f.hostSock, host)
		if resp.Header.Get("X-Egress-Reason") != "manifest_not_loaded" {
			t.Fatalf("the integration whose manifest links to a root-only file: %s %q", resp.Status, body)
		}
		var head strings.Builder
		resp.Header.Write(&head)
		if leaks(body) || leaks(head.String()) {
			t.Fatalf("the 403 shows the root-only file's values:\n%s\n%s", head.String(), body)
		}
		if !strings.Contains(body, f.hostile+": ") || !strings.Contains(body, "egressd check "+f.hostile) {
			t.Fatalf("the 403 does not say where the operator reads why: %q", body)
		}
	}
	if code, body := readyz(t, sv.admin); code != http.StatusServiceUnavailable || leaks(body) || !strings.Contains(body, f.hostile) {
		t.Fatalf("/readyz (the app can reach a sidecar's admin port): %d %s", code, body)
	}
	// The operator's copies keep the whole message.
	waitFor(t, &lockedFile{path: f.audit}, `"reason":"manifest_not_loaded"[^\n]*"error":"[^\n]*ROOTONLY`)
	if !strings.Contains(sv.stderr.String(), secret) {
		t.Fatalf("stderr lost the operator's message:\n%s", sv.stderr.String())
	}
}

// connectOn sends one CONNECT to the unix socket and returns the answer
// and its body.
func connectOn(t *testing.T, sock, host string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT "+host+":443 HTTP/1.1\r\nHost: "+host+":443\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}
