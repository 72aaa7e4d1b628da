package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/egressd/egressd/proxy"
	"github.com/egressd/egressd/proxy/proxytest"
)

// brokeredValue is distinctive: found anywhere it must not be, it is a leak.
// brokeredValuePattern matches it without holding it, for a grep inside the
// sandbox whose own command line must not be a hit.
const (
	brokeredValue        = "sk-live-DISTINCT-9f3c2a7e51"
	brokeredValuePattern = "sk-live-DISTINC[T]-9f3c2a7e51"
)

// headerRecordingOrigin is a real TLS origin on 127.0.0.3 that answers for
// api.bound.example (bound) and plain.bound.example (allowed, not bound)
// and records each request's Authorization header by host.
type headerRecordingOrigin struct {
	port string
	mu   sync.Mutex
	seen map[string][]string // host -> Authorization values
}

func startHeaderRecordingOrigin(t *testing.T, ca *proxytest.CA) *headerRecordingOrigin {
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &headerRecordingOrigin{seen: map[string][]string{}}
	_, o.port, _ = net.SplitHostPort(ln.Addr().String())
	srv := &http.Server{
		ErrorLog:  log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{ca.Leaf(t, "api.bound.example", "plain.bound.example")}, NextProtos: []string{"h2", "http/1.1"}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host, _, _ := net.SplitHostPort(r.Host)
			o.mu.Lock()
			got := r.Header.Get("Authorization")
			if k := r.Header.Get("X-Api-Key"); k != "" {
				got = "X-Api-Key " + k
			}
			o.seen[host] = append(o.seen[host], got)
			o.mu.Unlock()
			if r.URL.Path == "/notes" { // an origin that shows the program's data back
				b, err := io.ReadAll(r.Body)
				if err == nil {
					w.Write(b)
				}
				return
			}
			if r.URL.Path == "/echo" { // an origin that hands the credential back
				w.Header().Set("X-Echo", r.Header.Get("X-Api-Key"))
				io.WriteString(w, "echo:"+r.Header.Get("X-Api-Key")+"\n")
				return
			}
			io.WriteString(w, "hello from "+host)
		}),
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return o
}

func (o *headerRecordingOrigin) received(host string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seen[host]...)
}

// boundSecretEnv is a sandbox env whose manifest declares ACME_KEY and allows
// api.bound.example and plain.bound.example, both served by a recording
// origin.
type boundSecretEnv struct {
	*sandboxEnv
	rec *headerRecordingOrigin
}

func newBoundSecretEnv(t *testing.T) *boundSecretEnv {
	e := &boundSecretEnv{sandboxEnv: newSandboxEnv(t)}
	e.rec = startHeaderRecordingOrigin(t, e.ca)
	for _, n := range []string{"api.bound.example", "plain.bound.example"} {
		e.dns.Add(t, n+". 60 IN A 127.0.0.3")
	}
	os.WriteFile(filepath.Join(e.dir, "voiceos.integration.json"), []byte(`{"schemaVersion":1,"id":"com.test.secret","version":"1.0.0",
	"runtime":{"kind":"local-mcp","command":"sh","args":["-c","echo runtime ran"]},
	"auth":{"kind":"apiKey","fields":[{"key":"ACME_KEY","label":"k","secret":true}]},
	"permissions":[{"kind":"network","domains":["api.bound.example","plain.bound.example"]}]}`), 0o644)
	return e
}

// secretCommand is egressd run with the given flags before the folder.
func (e *boundSecretEnv) secretCommand(flags []string, script string) *exec.Cmd {
	args := []string{"run", "--state", e.state, "--audit-log", e.audit, "--resolver", e.dns.Addr,
		"--allow-private", "127.0.0.3/32", "--allow-port", e.rec.port}
	args = append(append(args, flags...), e.dir, "--", "/bin/sh", "-c", script)
	cmd := exec.Command(egressdBinary(e.t), args...)
	cmd.Env = append(os.Environ(), "ACME_KEY="+brokeredValue)
	return cmd
}

// TestRunSecretValueIsNowhereTheSandboxCanLook: with --secret, the
// program's variable holds a placeholder; no /proc/*/environ it can read,
// and no file under the folders it can read or write, holds the value;
// the CA variables name a bundle of the host's roots and the broker CA,
// name-constrained to the bound host, also bound over the system bundle.
func TestRunSecretValueIsNowhereTheSandboxCanLook(t *testing.T) {
	e := newBoundSecretEnv(t)
	node := nodeForSecretTests(t)
	script := strings.Join([]string{
		`echo "ph=$ACME_KEY"`,
		node + ` -e 'const fs = require("fs"); const env = fs.readFileSync("/proc/self/environ", "latin1");
console.log("node_placeholder=" + /^egressd-ph-/.test(process.env.ACME_KEY), "node_extra=" + process.env.NODE_EXTRA_CA_CERTS,
  "node_environ_hit=" + new RegExp("` + brokeredValuePattern + `").test(env), "node_ca_loaded=" + require("tls").rootCertificates.length)' 2>&1`,
		`for f in /proc/[0-9]*/environ; do tr '\0' '\n' < $f 2>/dev/null; done | grep -c '` + brokeredValuePattern + `' | sed 's/^/environ_hits=/'`,
		`for f in /proc/[0-9]*/environ; do tr '\0' '\n' < $f 2>/dev/null; done | grep -q '^ACME_KEY=egressd-ph-' && echo environ_placeholder=yes`,
		`grep -rsl '` + brokeredValuePattern + `' /etc /tmp /home /var /proc/self/cmdline /proc/1/cmdline ` + e.dir + ` | sed 's/^/file_hit=/'`,
		`echo "vars=$SSL_CERT_FILE,$NODE_EXTRA_CA_CERTS,$REQUESTS_CA_BUNDLE,$CURL_CA_BUNDLE"`,
		`cmp -s "$SSL_CERT_FILE" /etc/ssl/certs/ca-certificates.crt && echo system_bundle=same`,
		`echo BUNDLE; cat "$SSL_CERT_FILE"`,
	}, "; ")
	out, errs, code := runCmd(t, e.secretCommand([]string{"--secret", "ACME_KEY=api.bound.example"}, script))
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	report, bundle, _ := strings.Cut(out, "BUNDLE\n")
	ph := ""
	for _, l := range strings.Split(report, "\n") {
		if p, ok := strings.CutPrefix(l, "ph="); ok {
			ph = p
		}
	}
	if !strings.HasPrefix(ph, "egressd-ph-") || len(ph) != max(len(brokeredValue), 32) {
		t.Fatalf("placeholder %q\n%s", ph, report)
	}
	want := "vars=/etc/egressd/ca-certificates.crt,/etc/egressd/ca-certificates.crt,/etc/egressd/ca-certificates.crt,/etc/egressd/ca-certificates.crt"
	for _, w := range []string{"environ_hits=0", "environ_placeholder=yes", want, "system_bundle=same",
		"node_placeholder=true node_extra=/etc/egressd/ca-certificates.crt node_environ_hit=false"} {
		if !strings.Contains(report, w) {
			t.Errorf("want %s in:\n%s", w, report)
		}
	}
	if strings.Contains(report, "Ignoring extra certs") {
		t.Errorf("node could not load the trust bundle:\n%s", report)
	}
	if strings.Contains(report, "file_hit=") || strings.Contains(out, brokeredValue) {
		t.Errorf("the value is readable inside:\n%s", report)
	}
	if strings.Contains(errs, brokeredValue) || strings.Contains(e.auditLog(), brokeredValue) {
		t.Errorf("the value is in egressd's stderr or the audit log")
	}
	if !strings.Contains(e.auditLog(), `"action":"secret_bound","msg":"ACME_KEY: api.bound.example"`) {
		t.Errorf("the binding is not in the audit log:\n%s", e.auditLog())
	}
	checkTrustBundle(t, []byte(bundle), "api.bound.example")
}

// checkTrustBundle: every certificate of the host's bundle, then one CA of
// egressd's, constrained to bound.
func checkTrustBundle(t *testing.T, bundle []byte, bound string) {
	t.Helper()
	host, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Skip("no host bundle at the Debian path")
	}
	if !bytes.HasPrefix(bundle, host) {
		t.Fatal("the bundle does not start with the host's roots")
	}
	var last *x509.Certificate
	for rest := bundle[len(host):]; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if last, err = x509.ParseCertificate(b.Bytes); err != nil {
			t.Fatal(err)
		}
	}
	if last == nil || !last.IsCA || last.Subject.CommonName != "egressd ephemeral broker CA" || strings.Join(last.PermittedDNSDomains, ",") != bound {
		t.Fatalf("broker CA missing or unconstrained: %+v", last)
	}
}

// TestRunSecretBindingTheOperatorCannotMakeFailsAtStart: each is one line
// on stderr, naming the problem and never the value, and the program
// never starts.
func TestRunSecretBindingTheOperatorCannotMakeFailsAtStart(t *testing.T) {
	e := newBoundSecretEnv(t)
	cases := []struct {
		name  string
		flags []string
		env   []string
		want  string
	}{
		{"undeclared_key", []string{"--secret", "OTHER_KEY=api.bound.example"}, []string{"OTHER_KEY=" + brokeredValue}, "--secret OTHER_KEY: OTHER_KEY is not a key the manifest declares"},
		{"unlisted_host", []string{"--secret", "ACME_KEY=paste.example"}, nil, "--secret ACME_KEY: host paste.example is not allowed by the manifest's list in force"},
		{"wildcard_wider_than_the_manifest", []string{"--secret", "ACME_KEY=*.bound.example"}, nil, "host *.bound.example is not allowed"},
		{"unparsable_host", []string{"--secret", "ACME_KEY=https://api.bound.example/"}, nil, "--secret ACME_KEY: host "},
		{"unset_in_the_launcher", []string{"--secret", "ACME_KEY=api.bound.example"}, []string{"ACME_KEY="}, "--secret ACME_KEY: ACME_KEY is not set in egressd's environment"},
		{"no_hosts", []string{"--secret", "ACME_KEY"}, nil, "--secret ACME_KEY: must be NAME=HOST[,HOST…]"},
		{"twice", []string{"--secret", "ACME_KEY=api.bound.example", "--secret", "ACME_KEY=plain.bound.example"}, nil, "ACME_KEY is bound twice"},
		{"without_the_sandbox", []string{"--insecure-env-only", "--secret", "ACME_KEY=api.bound.example"}, nil, "--secret needs the sandbox"},
		{"upstream_ca_alone", []string{"--upstream-ca", "/dev/null"}, nil, "--upstream-ca verifies the hosts a secret is bound to"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := e.secretCommand(tc.flags, "echo program ran")
			cmd.Env = append(cmd.Env, tc.env...)
			out, errs, code := runCmd(t, cmd)
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			if code != exitFail || strings.Contains(out, "program ran") || len(lines) != 1 || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d\nstdout %s\nstderr (want one line with %q):\n%s", code, out, tc.want, errs)
			}
			if strings.Contains(errs, brokeredValue) {
				t.Fatalf("the error shows the value: %s", errs)
			}
		})
	}
}

// skipUntilBrokerBuilt skips the substitution tests until the broker (b15core)
// is merged; from then on proxy.BrokerBuilt is true and they run.
func skipUntilBrokerBuilt(t *testing.T) {
	if !proxy.BrokerBuilt {
		t.Skip("needs the broker (b15core)")
	}
}

// TestRunSecretReachesOnlyTheBoundHost: sandboxed curl and Node send
// "Authorization: Bearer $ACME_KEY"; the bound origin receives the value,
// over HTTP/1.1 and HTTP/2; the allowed but unbound host receives the
// placeholder, through a tunnel that shows the origin's own certificate.
func TestRunSecretReachesOnlyTheBoundHost(t *testing.T) {
	skipUntilBrokerBuilt(t)
	node := nodeForSecretTests(t)
	e := newBoundSecretEnv(t)
	bound := "https://api.bound.example:" + e.rec.port + "/"
	plain := "https://plain.bound.example:" + e.rec.port + "/"
	script := strings.Join([]string{
		`curl -sS -m 10 --http1.1 -H "Authorization: Bearer $ACME_KEY" ` + bound + `; echo`,
		`curl -sS -m 10 --http2 -H "Authorization: Bearer $ACME_KEY" ` + bound + `; echo`,
		`curl -sS -m 10 -u "user:$ACME_KEY" ` + bound + `; echo`,
		`curl -sS -m 10 --cacert ca.pem -H "Authorization: Bearer $ACME_KEY" ` + plain + `; echo`,
		node + ` -e 'fetch("` + bound + `", {headers: {authorization: "Bearer " + process.env.ACME_KEY}}).then(r => r.text()).then(t => console.log("node:", t), e => console.log("node failed:", e.cause && e.cause.code))'`,
	}, "; ")
	out, errs, code := runCmd(t, e.secretCommand([]string{"--secret", "ACME_KEY=api.bound.example", "--upstream-ca", filepath.Join(e.dir, "ca.pem")}, script))
	if code != 0 || strings.Count(out, "hello from api.bound.example") != 4 || !strings.Contains(out, "hello from plain.bound.example") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+brokeredValue))
	got := e.rec.received("api.bound.example")
	if len(got) != 4 || got[0] != "Bearer "+brokeredValue || got[1] != "Bearer "+brokeredValue || got[2] != basic || got[3] != "Bearer "+brokeredValue {
		t.Errorf("the bound host received %q", got)
	}
	for _, got := range e.rec.received("plain.bound.example") {
		if !strings.HasPrefix(got, "Bearer egressd-ph-") {
			t.Errorf("the unbound host received %q", got)
		}
	}
	if strings.Contains(out, brokeredValue) || strings.Contains(errs, brokeredValue) || strings.Contains(e.auditLog(), brokeredValue) {
		t.Error("the value leaked into the program's output, stderr or the audit log")
	}
}

// TestRunSecretUnverifiableOriginGetsNothing: without --upstream-ca the
// loopback origin's certificate does not verify against the system roots:
// the request fails and the origin receives nothing.
func TestRunSecretUnverifiableOriginGetsNothing(t *testing.T) {
	skipUntilBrokerBuilt(t)
	e := newBoundSecretEnv(t)
	bound := "https://api.bound.example:" + e.rec.port + "/"
	out, errs, _ := runCmd(t, e.secretCommand([]string{"--secret", "ACME_KEY=api.bound.example"}, `curl -sS -m 10 -H "Authorization: Bearer $ACME_KEY" `+bound+`; echo rc=$?`))
	if strings.Contains(out, "hello from") || len(e.rec.received("api.bound.example")) != 0 {
		t.Fatalf("an unverified origin was reached\nstdout:\n%s\nstderr:\n%s", out, errs)
	}
	if !strings.Contains(e.auditLog(), "upstream_unverified") {
		t.Errorf("no upstream_unverified in the audit log:\n%s", e.auditLog())
	}
}

func nodeForSecretTests(t *testing.T) string {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is required in CI")
		}
		t.Skip("node not installed")
	}
	return node
}

// TestRunSecretInACustomHeaderIsAddedAndItsEchoScrubbed: a sandboxed curl
// sends the key in a header of the API's own ("X-Api-Key: $ACME_KEY"); the
// bound origin receives the value and echoes it in a header and the body;
// the program sees only its placeholder.
func TestRunSecretInACustomHeaderIsAddedAndItsEchoScrubbed(t *testing.T) {
	skipUntilBrokerBuilt(t)
	e := newBoundSecretEnv(t)
	bound := "https://api.bound.example:" + e.rec.port + "/echo"
	out, errs, code := runCmd(t, e.secretCommand([]string{"--secret", "ACME_KEY=api.bound.example", "--upstream-ca", filepath.Join(e.dir, "ca.pem")},
		`curl -sS -m 10 -D - -H "X-Api-Key: $ACME_KEY" `+bound+`; echo "ph=$ACME_KEY"`))
	if code != 0 || !strings.Contains(out, "echo:egressd-ph-") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if got := e.rec.received("api.bound.example"); len(got) != 1 || got[0] != "X-Api-Key "+brokeredValue {
		t.Errorf("the bound host received %q", got)
	}
	if strings.Contains(out, brokeredValue) || strings.Contains(errs, brokeredValue) || strings.Contains(e.auditLog(), brokeredValue) {
		t.Errorf("the value reached the program, stderr or the audit log:\n%s", out)
	}
}

// TestRunSecretMisdirectedOrForAnotherHostIsRefusedAndAudited: with two
// keys bound to two hosts, a sandboxed curl that sends the second key's
// placeholder to the first host, or names the second host in Host: on the
// first host's connection, is refused (403 with the reason) and audited;
// the origin receives neither request.
func TestRunSecretMisdirectedOrForAnotherHostIsRefusedAndAudited(t *testing.T) {
	skipUntilBrokerBuilt(t)
	e := newBoundSecretEnv(t)
	os.WriteFile(filepath.Join(e.dir, "voiceos.integration.json"), []byte(`{"schemaVersion":1,"id":"com.test.secret","version":"1.0.0",
	"runtime":{"kind":"local-mcp","command":"sh","args":["-c","echo runtime ran"]},
	"auth":{"kind":"apiKey","fields":[{"key":"ACME_KEY","label":"k","secret":true},{"key":"PLAIN_KEY","label":"p","secret":true}]},
	"permissions":[{"kind":"network","domains":["api.bound.example","plain.bound.example"]}]}`), 0o644)
	bound := "https://api.bound.example:" + e.rec.port + "/"
	cmd := e.secretCommand([]string{"--secret", "ACME_KEY=api.bound.example", "--secret", "PLAIN_KEY=plain.bound.example", "--upstream-ca", filepath.Join(e.dir, "ca.pem")},
		`curl -sS -m 10 -o /dev/null -w "misdirected=%{http_code}\n" -H "Authorization: Bearer $PLAIN_KEY" `+bound+
			`; curl -sS -m 10 -o /dev/null -w "other_host=%{http_code}\n" -H "Host: plain.bound.example" `+bound)
	cmd.Env = append(cmd.Env, "PLAIN_KEY=plain-secret-value-0123456789")
	out, errs, code := runCmd(t, cmd)
	if code != 0 || !strings.Contains(out, "misdirected=403") || !strings.Contains(out, "other_host=403") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if got := e.rec.received("api.bound.example"); len(got) != 0 {
		t.Errorf("the origin received %q", got)
	}
	log := e.auditLog()
	for _, reason := range []string{`"reason":"secret_misdirected"`, `"reason":"host_mismatch"`} {
		if !strings.Contains(log, reason) {
			t.Errorf("no %s in the audit log:\n%s", reason, log)
		}
	}
	if strings.Contains(log, "plain-secret-value-0123456789") || strings.Contains(log, brokeredValue) {
		t.Error("a value is in the audit log")
	}
}
