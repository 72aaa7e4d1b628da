package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is an io.Writer the daemon and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls the daemon's output until re matches; the daemon writes
// each line once, so this waits on its progress, bounded in time.
func waitFor(t *testing.T, buf interface{ String() string }, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := rx.FindStringSubmatch(buf.String()); m != nil {
			return m
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no match for %s in:\n%s", re, buf.String())
	return nil
}

func TestServeReloadAndDrainAsTheUnitRunsIt(t *testing.T) {
	dir := t.TempDir()
	manifests := filepath.Join(dir, "weather")
	os.MkdirAll(manifests, 0o755)
	writeManifest := func(version, hosts string) {
		os.WriteFile(filepath.Join(manifests, "manifest.json"), weatherManifest(version, hosts), 0o600)
	}
	writeManifest("1.0.0", `"api.weather.example","old.weather.example"`)
	cfg := filepath.Join(dir, "egressd.yaml")
	auditFile := filepath.Join(dir, "audit.log")
	os.WriteFile(cfg, []byte(`state_dir: `+filepath.Join(dir, "state")+`
admin: 127.0.0.1:0
resolvers: ["127.0.0.1:9"]
audit:
  path: `+auditFile+`
integrations:
  - manifest: weather
    listen: 127.0.0.1:0
`), 0o600)

	sv := startServe(t, "--config", cfg)
	listen, sig := sv.listen, sv.sig
	admin := waitFor(t, &sv.stderr, `admin on (127\.0\.0\.1:\d+)`)[1]
	ready := func() int {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := ready(); code != 200 {
		t.Fatalf("/readyz = %d", code)
	}
	connect := func(host string) string { return connectReason(t, listen, host) }
	// The resolver at port 9 answers nothing: an allowed name is dns_error,
	// a denied one never gets that far.
	if r := connect("old.weather.example"); r != "dns_error" {
		t.Fatalf("before reload: %s", r)
	}

	writeManifest("1.1.0", `"api.weather.example"`) // narrowing: applies at once
	sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"event":"policy","integration":"com.test.weather","integration_version":"1.1.0","generation":\d+,"action":"loaded"`)
	if r := connect("old.weather.example"); r != "not_allowlisted" {
		t.Fatalf("after reload: %s", r)
	}

	writeManifest("1.2.0", `"api.weather.example","new.weather.example"`) // widening: waits
	sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"action":"pending","pending":"1.2.0"`)
	if r := connect("new.weather.example"); r != "pending_approval" {
		t.Fatalf("widening applied without approval: %s", r)
	}

	sv.stop(t)
	data, _ := os.ReadFile(auditFile)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var last map[string]any
	json.Unmarshal([]byte(lines[len(lines)-1]), &last)
	if last["action"] != "shutdown" {
		t.Fatalf("last audit line is not the clean shutdown record: %s", lines[len(lines)-1])
	}
	if st, _ := os.Stat(auditFile); st.Mode().Perm() != 0o600 {
		t.Fatalf("audit file mode %v", st.Mode().Perm())
	}
}

// lockedFile reads a file on every String call, for waitFor.
type lockedFile struct {
	lockedBuffer
	path string
}

func (f *lockedFile) String() string {
	b, _ := os.ReadFile(f.path)
	return string(b)
}

// TestServeStartsABrokenManifestRefusingEverything: a manifest that does
// not load at start no longer stops serve (its author controls it, issue
// 13): its listener is up, refuses with manifest_not_loaded, and the
// warning names the problem.
func TestServeStartsABrokenManifestRefusingEverything(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"manifest_version":1,"id":"com.a.b","version":"1.0.0","network":{"connect":["10.0.0.1"]}}`), 0o600)
	sock := filepath.Join(t.TempDir(), "a.sock")
	var stdout, stderr lockedBuffer
	sig, done := make(chan os.Signal, 1), make(chan int, 1)
	go func() {
		done <- serve(context.Background(), []string{"--manifest", dir, "--listen", "unix:" + sock, "--state", t.TempDir(), "--resolver", "127.0.0.1:9"}, &stdout, &stderr, sig)
	}()
	waitFor(t, &stderr, `warning: [^\n]*network.connect\[0\]: bare IP addresses are not allowed \(\\?"10.0.0.1\\?"\)[^\n]*manifest_not_loaded`)
	waitFor(t, &stderr, `refusing every connection for `)
	if got := unixConnectReason(t, sock, "api.example.com"); got != "manifest_not_loaded" {
		t.Fatalf("%s, want manifest_not_loaded\n%s", got, stderr.String())
	}
	sig <- syscall.SIGTERM
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

func TestServeFlagProblems(t *testing.T) {
	var stdout, stderr lockedBuffer
	code := serve(context.Background(), []string{"--manifest", ".", "--allow-port", "0443", "--allow-private", "10.0.0.0/33"}, &stdout, &stderr, nil)
	if code != exitUsage || !strings.Contains(stderr.String(), `--allow-port: must be a port from 1 to 65535 ("0443")`) || !strings.Contains(stderr.String(), `--allow-private: must be a CIDR like "10.0.0.0/8" ("10.0.0.0/33")`) {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

func TestServeOpensAndClosesListenersAsFoldersComeAndGo(t *testing.T) {
	dir := t.TempDir()
	integrations := filepath.Join(dir, "integrations")
	// A folder appears whole (made beside, then renamed in): the folder
	// watcher may reload between a mkdir and the manifest's write, and a
	// folder seen without its manifest listens under no id.
	addIntegration := func(name, id string) {
		t.Helper()
		staged := filepath.Join(dir, "staging-"+name)
		if err := os.MkdirAll(staged, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(staged, "manifest.json"), []byte(`{"manifest_version":1,"id":"`+id+`","version":"1.0.0","network":{"connect":["api.`+name+`.example"]}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(integrations, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(staged, filepath.Join(integrations, name)); err != nil {
			t.Fatal(err)
		}
	}
	addIntegration("weather", "com.test.weather")
	sockets := t.TempDir()
	auditFile := filepath.Join(dir, "audit.log")
	cfg := filepath.Join(dir, "egressd.yaml")
	os.WriteFile(cfg, []byte(`state_dir: `+filepath.Join(dir, "state")+`
resolvers: ["127.0.0.1:9"]
audit: {path: `+auditFile+`}
manifests:
  - dir: integrations
    listen: unix:`+sockets+`/{name}.sock
`), 0o600)
	var stdout, stderr lockedBuffer
	sig := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() { done <- serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, sig) }()
	log := &lockedFile{path: auditFile}
	waitFor(t, log, `"integration":"com.test.weather".*"listener":"unix:`+regexp.QuoteMeta(sockets)+`/weather.sock"`)

	addIntegration("acme", "com.test.acme")
	sig <- syscall.SIGHUP
	waitFor(t, log, `"integration":"com.test.acme".*"action":"listening"`)
	if _, err := os.Stat(filepath.Join(sockets, "acme.sock")); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(integrations, "weather"))
	sig <- syscall.SIGHUP
	waitFor(t, log, `"event":"policy","integration":"com.test.weather".*"action":"removed"`)
	waitFor(t, log, `"listener":"unix:`+regexp.QuoteMeta(sockets)+`/weather.sock","action":"closed"`)
	if _, err := os.Stat(filepath.Join(sockets, "weather.sock")); !os.IsNotExist(err) {
		t.Fatalf("socket of a removed integration still there: %v", err)
	}
	sig <- syscall.SIGTERM
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

func TestServeWarnsAboutAWritableManifestFolder(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"manifest_version":1,"id":"com.test.weather","version":"1.0.0","network":{"connect":["api.weather.example"]}}`), 0o644)
	os.Chmod(dir, 0o777)
	var stdout, stderr lockedBuffer
	sig := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() {
		done <- serve(context.Background(), []string{"--manifest", dir, "--listen", "127.0.0.1:0", "--state", t.TempDir(), "--resolver", "127.0.0.1:9"}, &stdout, &stderr, sig)
	}()
	waitFor(t, &stderr, `warning: `+regexp.QuoteMeta(dir)+` can be changed by every user \(mode -rwxrwxrwx, owner \d+, group \d+\): whoever can write it can change com.test.weather's allowlist`)
	sig <- syscall.SIGTERM
	<-done
}

// connectReason sends one CONNECT for host:443 to listen and returns the
// answer's reason code.
func connectReason(t *testing.T, listen, host string) string {
	t.Helper()
	c, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT "+host+":443 HTTP/1.1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header.Get("X-Egress-Reason")
}

// TestServeAuditsRefusedUnixPeers: a local process outside allowed_peers is
// refused at accept, and the attempt is in the audit log.
func TestServeAuditsRefusedUnixPeers(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"manifest_version":1,"id":"com.test.weather","version":"1.0.0","network":{"connect":["api.weather.example"]}}`), 0o600)
	sock := filepath.Join(t.TempDir(), "weather.sock")
	auditFile := filepath.Join(dir, "audit.log")
	cfg := filepath.Join(dir, "egressd.yaml")
	os.WriteFile(cfg, []byte("state_dir: "+filepath.Join(dir, "state")+"\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: "+auditFile+"}\nintegrations:\n  - manifest: .\n    listen: unix:"+sock+"\n    allowed_peers: {uids: [4242424]}\n"), 0o600)
	var stdout, stderr lockedBuffer
	sig := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() { done <- serve(context.Background(), []string{"--config", cfg}, &stdout, &stderr, sig) }()
	waitFor(t, &stderr, `serving com.test.weather on unix:`)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitFor(t, &lockedFile{path: auditFile}, `"decision":"deny","reason":"operator_denied","rule":"allowed_peers".*"msg":"peer uid `+strconv.Itoa(os.Getuid())+` gid \d+ is not in allowed_peers"`)
	sig <- syscall.SIGTERM
	<-done
}

// An editor's save (write a temporary file, rename it over the manifest)
// reloads without SIGHUP, and the audit log sitting in the watched folder
// does not: with it, every audit line would reload the policy, and every
// reload's own line would trigger the next.
func TestServeReloadsOnAnEditorsSaveButNotOnItsOwnAuditLines(t *testing.T) {
	// A short settle makes a self-triggered reload happen within the test
	// instead of a quarter second after it.
	defer func(d time.Duration) { reloadSettle = d }(reloadSettle)
	reloadSettle = time.Millisecond
	dir := t.TempDir()
	writeManifest := func(version, hosts string) {
		tmp := filepath.Join(dir, ".manifest.json.swp")
		os.WriteFile(tmp, weatherManifest(version, hosts), 0o600)
		os.Rename(tmp, filepath.Join(dir, "manifest.json"))
	}
	writeManifest("1.0.0", `"api.weather.example","old.weather.example"`)
	cfg := filepath.Join(dir, "egressd.yaml")
	auditFile := filepath.Join(dir, "audit.log")
	os.WriteFile(cfg, []byte(`state_dir: `+filepath.Join(dir, "state")+`
resolvers: ["127.0.0.1:9"]
audit: {path: `+auditFile+`}
integrations:
  - manifest: manifest.json
    listen: 127.0.0.1:0
`), 0o600)
	sv := startServe(t, "--config", cfg)
	listen := sv.listen
	for range 3 { // audit lines in the watched folder
		if r := connectReason(t, listen, "evil.example"); r != "not_allowlisted" {
			t.Fatalf("before the edit: %s", r)
		}
	}
	writeManifest("1.1.0", `"api.weather.example"`)
	waitFor(t, &lockedFile{path: auditFile}, `"integration_version":"1.1.0","generation":\d+,"action":"loaded"`)
	if r := connectReason(t, listen, "old.weather.example"); r != "not_allowlisted" {
		t.Fatalf("after the edit: %s", r)
	}
	sv.stop(t)
	data, _ := os.ReadFile(auditFile)
	if n := strings.Count(string(data), `"event":"policy"`); n != 2 {
		t.Fatalf("%d policy events, want 2 (start, the edit): the audit log reloaded the policy\n%s", n, data)
	}
}

// weatherManifest is the test integration's Sollar manifest at version,
// allowing hosts (quoted JSON strings, comma-separated).
func weatherManifest(version, hosts string) []byte {
	return []byte(`{"manifest_version":1,"id":"com.test.weather","version":"` + version + `","network":{"connect":[` + hosts + `]}}`)
}

// served is an "egressd serve" running in the test, serving
// com.test.weather.
type served struct {
	listen string
	stderr lockedBuffer
	sig    chan os.Signal
	done   chan int
}

func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	sv := &served{sig: make(chan os.Signal, 1), done: make(chan int, 1)}
	var stdout lockedBuffer
	go func() { sv.done <- serve(context.Background(), args, &stdout, &sv.stderr, sv.sig) }()
	sv.listen = waitFor(t, &sv.stderr, `serving com.test.weather on (127\.0\.0\.1:\d+)`)[1]
	return sv
}

// stop sends SIGTERM and requires a clean exit.
func (sv *served) stop(t *testing.T) {
	t.Helper()
	sv.sig <- syscall.SIGTERM
	select {
	case code := <-sv.done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, sv.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
}
