package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/egressd/egressd/proxy/proxytest"
)

const configPlaceholder = "egressd-ph-serveTESTplaceholder0001"

// writeOperatorCA writes a CA certificate and its key as an operator would
// give them (tls.ca_cert, tls.ca_key); isCA false makes a leaf instead.
func writeOperatorCA(t *testing.T, dir, name string, isCA bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "operator " + name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), BasicConstraintsValid: true}
	if isCA {
		tmpl.IsCA, tmpl.KeyUsage = true, x509.KeyUsageCertSign
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), 0o600)
	return certFile, keyFile
}

// brokeredServeSetup is a folder with a VoiceOS manifest declaring ACME_KEY,
// a value file, an operator CA, the recording origin's CA, and the fields
// of a config that binds ACME_KEY to api.bound.example.
type brokeredServeSetup struct {
	dir, valueFile, caCert, caKey, originCA string
	fields                                  map[string]string
	rec                                     *headerRecordingOrigin
	dns                                     *proxytest.DNS
}

func newBrokeredServeSetup(t *testing.T) *brokeredServeSetup {
	s := &brokeredServeSetup{dir: t.TempDir(), dns: proxytest.StartDNS(t)}
	ca := proxytest.NewCA(t)
	s.rec = startHeaderRecordingOrigin(t, ca)
	for _, n := range []string{"api.bound.example", "plain.bound.example"} {
		s.dns.Add(t, n+". 60 IN A 127.0.0.3")
	}
	os.WriteFile(filepath.Join(s.dir, "voiceos.integration.json"), []byte(`{"schemaVersion":1,"id":"com.test.weather","version":"1.0.0",
	"runtime":{"kind":"remote-mcp"},
	"auth":{"kind":"apiKey","fields":[{"key":"ACME_KEY","label":"k","secret":true}]},
	"permissions":[{"kind":"network","domains":["api.bound.example","plain.bound.example"]}]}`), 0o644)
	s.valueFile = filepath.Join(s.dir, "acme-key")
	os.WriteFile(s.valueFile, []byte(brokeredValue+"\n"), 0o600)
	s.caCert, s.caKey = writeOperatorCA(t, s.dir, "broker-ca", true)
	s.originCA = filepath.Join(s.dir, "origin-ca.pem")
	os.WriteFile(s.originCA, ca.PEM(), 0o644)
	s.fields = map[string]string{"env": "ACME_KEY", "hosts": "[api.bound.example]", "value_file": s.valueFile,
		"placeholder": configPlaceholder, "ca_cert": s.caCert, "ca_key": s.caKey, "upstream_ca": s.originCA}
	return s
}

// config writes the config with the fields as given (edit changes some)
// and returns its path.
func (s *brokeredServeSetup) config(t *testing.T, edit map[string]string) string {
	t.Helper()
	f := map[string]string{}
	for k, v := range s.fields {
		f[k] = v
	}
	for k, v := range edit {
		f[k] = v
	}
	body := "state_dir: " + filepath.Join(s.dir, "state") + "\nresolvers: [\"" + s.dns.Addr + "\"]\naudit:\n  path: " + filepath.Join(s.dir, "audit.log") +
		"\ntls:\n  ca_cert: " + f["ca_cert"] + "\n  ca_key: " + f["ca_key"] + "\n  upstream_ca: " + f["upstream_ca"] +
		"\nintegrations:\n  - manifest: .\n    listen: 127.0.0.1:0\n    allow_private: [127.0.0.3/32]\n    allow_ports: [" + s.rec.port + "]" +
		"\n    secrets:\n      - env: " + f["env"] + "\n        hosts: " + f["hosts"] + "\n        value_file: " + f["value_file"] + "\n        placeholder: " + f["placeholder"] + f["extra"] + "\n"
	cfg := filepath.Join(s.dir, "egressd.yaml")
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestServeSecretConfigStartsAndCheckCatchesEachBadField: serve starts
// with a config, a value file and an operator CA; check --config passes
// it and prints "FILE: problem" for each bad field, never the value.
func TestServeSecretConfigStartsAndCheckCatchesEachBadField(t *testing.T) {
	s := newBrokeredServeSetup(t)
	good := s.config(t, nil)
	out, _, code := runCLI(t, "check", "--config", good)
	if code != exitOK || !strings.Contains(out, good+": ok config, 1 integrations") {
		t.Fatalf("check --config on the good config: exit %d\n%s", code, out)
	}
	sp := startServeProcess(t, good)
	sp.stop(t)
	if strings.Contains(sp.stderr.String(), brokeredValue) {
		t.Fatal("serve's stderr shows the value")
	}
	for _, args := range [][]string{
		{"explain", "--manifest", s.dir, "--config", good, "api.bound.example"},
		{"state", "list", "--state", filepath.Join(s.dir, "state")},
		{"check", "--json", "--config", good, s.dir},
	} {
		out, errs, _ := runCLI(t, args...)
		if strings.Contains(out+errs, brokeredValue) || out+errs == "" {
			t.Fatalf("egressd %s shows the value or nothing:\n%s%s", strings.Join(args, " "), out, errs)
		}
	}

	leaf, leafKey := writeOperatorCA(t, s.dir, "leaf", false)
	_, otherKey := writeOperatorCA(t, s.dir, "other", true)
	empty := filepath.Join(s.dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	cases := []struct {
		name string
		edit map[string]string
		want string
	}{
		{"missing_value_file", map[string]string{"value_file": filepath.Join(s.dir, "missing")}, "integrations[0].secrets[0].value_file: "},
		{"value_file_is_a_folder", map[string]string{"value_file": s.dir}, "is a folder, not a regular file"},
		{"empty_value_file", map[string]string{"value_file": empty}, "integrations[0].secrets[0] (ACME_KEY): the value of ACME_KEY (" + empty + ") is empty"},
		{"the_value_given_as_placeholder", map[string]string{"placeholder": brokeredValue}, `integrations[0].secrets[0].placeholder: must start with "egressd-ph-"`},
		{"short_placeholder", map[string]string{"placeholder": "egressd-ph-abc"}, "integrations[0].secrets[0].placeholder: must be at least 24 characters (14)"},
		{"undeclared_env", map[string]string{"env": "OTHER_KEY"}, "integrations[0].secrets[0] (OTHER_KEY): OTHER_KEY is not a key the manifest declares"},
		{"unlisted_host", map[string]string{"hosts": "[paste.example]"}, "integrations[0].secrets[0] (ACME_KEY): host paste.example is not allowed"},
		{"unknown_key", map[string]string{"extra": "\n        value: " + brokeredValue}, `integrations[0].secrets[0].value: unknown field "value"`},
		{"ca_is_a_leaf", map[string]string{"ca_cert": leaf, "ca_key": leafKey}, "the certificate is not a CA certificate"},
		{"key_of_another_ca", map[string]string{"ca_key": otherKey}, "tls.ca_cert, tls.ca_key ("},
		{"missing_ca_key", map[string]string{"ca_key": filepath.Join(s.dir, "missing.key")}, "tls.ca_key: "},
		{"upstream_ca_not_pem", map[string]string{"upstream_ca": s.valueFile}, "tls.upstream_ca: " + s.valueFile + ": holds no PEM certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := s.config(t, tc.edit)
			out, _, code := runCLI(t, "check", "--config", cfg)
			found := false
			for _, line := range strings.Split(out, "\n") {
				found = found || strings.HasPrefix(line, cfg+": ") && strings.Contains(line, tc.want)
			}
			if code != exitFail || !found {
				t.Fatalf("exit %d, want a line %q in:\n%s", code, cfg+": …"+tc.want, out)
			}
			if strings.Contains(out, brokeredValue) {
				t.Fatalf("check shows the value:\n%s", out)
			}
		})
	}
	// serve refuses at start, for that integration only (issue 13), what
	// check refuses, and says why without the value.
	cfg := s.config(t, map[string]string{"hosts": "[paste.example]"})
	sb := &serveBinary{stderr: &lockedBuffer{}, done: make(chan error, 1)}
	sb.cmd = exec.Command(egressdBinary(t), "serve", "--config", cfg)
	sb.cmd.Stderr = sb.stderr
	if err := sb.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { sb.done <- sb.cmd.Wait() }()
	t.Cleanup(func() {
		if sb.cmd.ProcessState == nil {
			sb.cmd.Process.Kill()
			<-sb.done
		}
	})
	waitFor(t, sb.stderr, `warning: [^\n]*host paste.example is not allowed[^\n]*manifest_not_loaded`)
	waitFor(t, sb.stderr, `refusing every connection for `)
	sb.stopsOnSIGTERM(t)
	if strings.Contains(sb.stderr.String(), brokeredValue) {
		t.Fatalf("serve with an unlisted host shows the value:\n%s", sb.stderr.String())
	}
}

// TestServeReloadKeepsTheLastGoodBindingAndSaysTLSNeedsARestart: an
// unreadable value file refuses the reload (the last good config stays);
// a changed tls: is warned about, since the CA is read at start only.
func TestServeReloadKeepsTheLastGoodBindingAndSaysTLSNeedsARestart(t *testing.T) {
	s := newBrokeredServeSetup(t)
	cfg := s.config(t, nil)
	sp := startServeProcess(t, cfg)
	defer sp.stop(t)
	os.Remove(s.valueFile)
	sp.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, sp.stderr, `egressd: reload: .*secrets\[0\]\.value_file: `)
	os.WriteFile(s.valueFile, []byte(brokeredValue+"\n"), 0o600)
	_, other := writeOperatorCA(t, s.dir, "next", true)
	s.config(t, map[string]string{"upstream_ca": other[:len(other)-len(".key")] + ".pem"})
	sp.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, sp.stderr, `tls: changed; .*restart egressd to apply`)
	if strings.Contains(sp.stderr.String(), brokeredValue) {
		t.Fatal("stderr shows the value")
	}
	data, _ := os.ReadFile(filepath.Join(s.dir, "audit.log"))
	if strings.Contains(string(data), brokeredValue) || !strings.Contains(string(data), `"action":"restart_needed"`) {
		t.Fatalf("audit log:\n%s", data)
	}
}

// TestServeSecretReachesOnlyTheBoundHost: a real curl through serve's
// listener, trusting the operator CA, sends the placeholder; the bound
// origin receives the value, an allowed unbound host the placeholder; a
// rotated value file applies at the next reload.
func TestServeSecretReachesOnlyTheBoundHost(t *testing.T) {
	skipUntilBrokerBuilt(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	s := newBrokeredServeSetup(t)
	sp := startServeProcess(t, s.config(t, nil))
	defer sp.stop(t)
	get := func(host, cacert string) string {
		out, err := exec.Command(curl, "-sS", "-m", "10", "-x", "http://"+sp.listen, "--cacert", cacert,
			"-H", "Authorization: Bearer "+configPlaceholder, "https://"+host+":"+s.rec.port+"/").CombinedOutput()
		if err != nil {
			t.Fatalf("curl %s: %v\n%s\n%s", host, err, out, sp.stderr.String())
		}
		return string(out)
	}
	if got := get("api.bound.example", s.caCert); got != "hello from api.bound.example" {
		t.Fatalf("bound host: %q", got)
	}
	if got := get("plain.bound.example", s.originCA); got != "hello from plain.bound.example" {
		t.Fatalf("unbound host: %q", got)
	}
	if got := s.rec.received("api.bound.example"); len(got) != 1 || got[0] != "Bearer "+brokeredValue {
		t.Fatalf("the bound host received %q", got)
	}
	if got := s.rec.received("plain.bound.example"); len(got) != 1 || got[0] != "Bearer "+configPlaceholder {
		t.Fatalf("the unbound host received %q", got)
	}
	rotated := "sk-live-ROTATED-1234567890"
	os.WriteFile(s.valueFile, []byte(rotated+"\n"), 0o600)
	sp.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, &lockedFile{path: filepath.Join(s.dir, "audit.log")}, `"event":"policy"[^\n]*"generation":2`) // the reload's policy event
	get("api.bound.example", s.caCert)
	if got := s.rec.received("api.bound.example"); got[len(got)-1] != "Bearer "+rotated {
		t.Fatalf("the rotated value did not apply: %q", got[len(got)-1])
	}
	if data, _ := os.ReadFile(filepath.Join(s.dir, "audit.log")); strings.Contains(string(data), brokeredValue) || strings.Contains(string(data), rotated) {
		t.Fatal("the audit log holds a value")
	}
}

// TestServeRotatedValueFileIsAReload: a value file rewritten in place (or
// swapped by a Secret volume's update) reloads without a SIGHUP, as a
// manifest change does.
func TestServeRotatedValueFileIsAReload(t *testing.T) {
	s := newBrokeredServeSetup(t)
	sp := startServeProcess(t, s.config(t, nil))
	defer sp.stop(t)
	next := s.valueFile + ".next"
	os.WriteFile(next, []byte("sk-live-ROTATED-1234567890\n"), 0o600)
	if err := os.Rename(next, s.valueFile); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &lockedFile{path: filepath.Join(s.dir, "audit.log")}, `"event":"policy"[^\n]*"generation":2`)
}
