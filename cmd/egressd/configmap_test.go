package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// kubeletWrite updates dir as kubelet's AtomicWriter updates a mounted
// ConfigMap (pkg/volume/util/atomic_writer.go): the payload goes into a new
// timestamped folder, a "..data_tmp" link to it is renamed over "..data",
// user-visible links "name -> ..data/name" are made once, and the previous
// timestamped folder is removed. The visible file is never written.
func kubeletWrite(t *testing.T, dir string, payload map[string][]byte) {
	t.Helper()
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(ts, 0o755)
	for name, data := range payload {
		if err := os.WriteFile(filepath.Join(ts, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name := range payload {
		visible := filepath.Join(dir, name)
		if _, err := os.Readlink(visible); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), visible); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServeReloadsWhenKubeletSwapsTheConfigMap: kubelet updates a mounted
// ConfigMap by swapping the "..data" link; the manifest path itself is a
// link that never changes, so a watch on its name never fired and a
// narrowing stayed unapplied until a SIGHUP the sidecar cannot receive.
// Twice in a row, since the second swap must be followed from the first.
func TestServeReloadsWhenKubeletSwapsTheConfigMap(t *testing.T) {
	defer func(d time.Duration) { reloadSettle = d }(reloadSettle)
	reloadSettle = time.Millisecond
	dir := t.TempDir()
	mount := filepath.Join(dir, "etc-egressd")
	os.Mkdir(mount, 0o755)
	kubeletWrite(t, mount, map[string][]byte{"manifest.json": weatherManifest("1.0.0", `"api.weather.example","old.weather.example","older.weather.example"`)})
	auditFile := filepath.Join(dir, "audit.log")
	sv := startServe(t, "--manifest", filepath.Join(mount, "manifest.json"), "--listen", "127.0.0.1:0",
		"--state", filepath.Join(dir, "state"), "--resolver", "127.0.0.1:9", "--audit-log", auditFile)
	audit := &lockedFile{path: auditFile}
	if r := connectReason(t, sv.listen, "old.weather.example"); r != "dns_error" {
		t.Fatalf("before the update: %s", r)
	}

	kubeletWrite(t, mount, map[string][]byte{"manifest.json": weatherManifest("1.0.1", `"api.weather.example","older.weather.example"`)})
	waitFor(t, audit, `"integration_version":"1.0.1","generation":\d+,"action":"loaded"`)
	if r := connectReason(t, sv.listen, "old.weather.example"); r != "not_allowlisted" {
		t.Fatalf("after kubelet's first swap: %s", r)
	}

	kubeletWrite(t, mount, map[string][]byte{"manifest.json": weatherManifest("1.0.2", `"api.weather.example"`)})
	waitFor(t, audit, `"integration_version":"1.0.2","generation":\d+,"action":"loaded"`)
	if r := connectReason(t, sv.listen, "older.weather.example"); r != "not_allowlisted" {
		t.Fatalf("after kubelet's second swap: %s", r)
	}
	sv.stop(t)
}

// TestServeReloadsWhenADeployLinkIsSwapped: "ln -sfn releases/v2 current"
// changes the folder a manifest path goes through, in a folder above the
// manifest's own.
func TestServeReloadsWhenADeployLinkIsSwapped(t *testing.T) {
	defer func(d time.Duration) { reloadSettle = d }(reloadSettle)
	reloadSettle = time.Millisecond
	dir := t.TempDir()
	for v, hosts := range map[string]string{"v1": `"api.weather.example","old.weather.example"`, "v2": `"api.weather.example"`} {
		os.MkdirAll(filepath.Join(dir, "releases", v, "weather"), 0o755)
		version := map[string]string{"v1": "1.0.0", "v2": "1.0.1"}[v]
		os.WriteFile(filepath.Join(dir, "releases", v, "weather", "manifest.json"), weatherManifest(version, hosts), 0o644)
	}
	current := filepath.Join(dir, "current")
	os.Symlink("releases/v1", current)
	auditFile := filepath.Join(dir, "audit.log")
	sv := startServe(t, "--manifest", filepath.Join(current, "weather", "manifest.json"), "--listen", "127.0.0.1:0",
		"--state", filepath.Join(dir, "state"), "--resolver", "127.0.0.1:9", "--audit-log", auditFile)
	// ln -sfn: a new link renamed over the old one.
	os.Symlink("releases/v2", filepath.Join(dir, ".current.tmp"))
	os.Rename(filepath.Join(dir, ".current.tmp"), current)
	waitFor(t, &lockedFile{path: auditFile}, `"integration_version":"1.0.1","generation":\d+,"action":"loaded"`)
	if r := connectReason(t, sv.listen, "old.weather.example"); r != "not_allowlisted" {
		t.Fatalf("after the deploy link moved: %s", r)
	}
	sv.stop(t)
}
