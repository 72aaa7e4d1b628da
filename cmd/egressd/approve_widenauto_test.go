package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// idTaker is round 28's first approve finding (s1.sh, s1b.sh), served by
// the real binary: folder g holds com.b 1.0.0 (b.example); serve serves
// folder f as com.a with widen: auto (or a pin_digest), in the same
// version memory. f's author renames f to com.b 2.0.0, adding
// evil.example, and the operator approves the id change the command
// egressd printed, whose preview says com.b 2.0.0's widening still waits.
type idTaker struct {
	dir, state, f, g, sock, cfg, auditFile string
	serve                                  *exec.Cmd
	stderr                                 *lockedBuffer
}

func newIDTaker(t *testing.T, gate string) *idTaker {
	t.Helper()
	dir := t.TempDir()
	k := &idTaker{dir: dir, state: filepath.Join(dir, "state"), f: filepath.Join(dir, "f"), g: filepath.Join(dir, "g"),
		sock: filepath.Join(dir, "f.sock"), cfg: filepath.Join(dir, "egressd.yaml"), auditFile: filepath.Join(dir, "audit.log")}
	os.Mkdir(k.f, 0o755)
	os.Mkdir(k.g, 0o755)
	erpFolder(t, k.g, "com.b", "1.0.0", "b.example")
	if out, errs, code := runBinary(t, "approve", "--state", k.state, "--new-id", "--yes", "--manifest", k.g); code != exitOK {
		t.Fatalf("binding g to com.b: exit %d\n%s%s", code, out, errs)
	}
	k.write(t, "com.a", "1.0.0", "a.example")
	cfg := "state_dir: " + k.state + "\nresolvers: [\"127.0.0.1:9\"]\naudit: {path: " + k.auditFile + ", checkpoints: none}\nintegrations:\n" +
		"  - manifest: " + k.f + "\n    listen: unix:" + k.sock + "\n    " + gate + "\n"
	writeFile(t, k.cfg, cfg)
	return k
}

// write replaces f's manifest in one rename, so the manifest watcher never
// reads half a file.
func (k *idTaker) write(t *testing.T, id, version string, hosts ...string) {
	t.Helper()
	tmp := t.TempDir()
	erpFolder(t, tmp, id, version, hosts...)
	if err := os.Rename(filepath.Join(tmp, "manifest.json"), filepath.Join(k.f, "manifest.json")); err != nil {
		t.Fatal(err)
	}
}

func (k *idTaker) start(t *testing.T) {
	t.Helper()
	k.stderr = &lockedBuffer{}
	k.serve = exec.Command(egressdBinary(t), "serve", "--config", k.cfg)
	k.serve.Stderr = k.stderr
	if err := k.serve.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { k.serve.Wait(); close(done) }()
	t.Cleanup(func() {
		k.serve.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			k.serve.Process.Kill()
			<-done
		}
	})
	waitFor(t, k.stderr, `serving com\.a on`)
}

// reload sends SIGHUP and waits until serve has logged a policy load
// later than every one logged before (the watcher may add its own).
func (k *idTaker) reload(t *testing.T) {
	t.Helper()
	after := k.lastGeneration(t)
	k.serve.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(20 * time.Second)
	for k.lastGeneration(t) <= after {
		if time.Now().After(deadline) {
			t.Fatalf("serve logged no load after generation %d:\n%s", after, k.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var policyGeneration = regexp.MustCompile(`"event":"policy"[^\n]*"generation":(\d+)`)

func (k *idTaker) lastGeneration(t *testing.T) int {
	t.Helper()
	data, _ := os.ReadFile(k.auditFile)
	last := 0
	for _, m := range policyGeneration.FindAllSubmatch(data, -1) {
		if n, _ := strconv.Atoi(string(m[1])); n > last {
			last = n
		}
	}
	return last
}

// takeID renames f to com.b 2.0.0 with evil.example and approves the id
// change as printed; it returns approve's output.
func (k *idTaker) takeID(t *testing.T) string {
	t.Helper()
	k.write(t, "com.b", "2.0.0", "b.example", "evil.example")
	k.reload(t)
	cmd := waitFor(t, k.stderr, `\((egressd approve --state \S+ --folder \S+ --digest \S+ com\.b 2\.0\.0)\)`)[1]
	out, errs, code := runBinary(t, append(strings.Fields(cmd)[1:], "--yes")...)
	if code != exitOK || !strings.Contains(out, "com.b 2.0.0 still waits for approval") {
		t.Fatalf("approve of f's id change: exit %d\n%s%s", code, out, errs)
	}
	k.reload(t)
	return out
}

// refusesEvil requires a CONNECT to evil.example through f's listener to
// be refused by policy (an allowed host fails later, at DNS).
func (k *idTaker) refusesEvil(t *testing.T, when string) {
	t.Helper()
	if r := unixConnectReason(t, k.sock, "evil.example"); r == "" || r == "dns_error" {
		t.Fatalf("%s: evil.example, which nobody approved for com.b, is allowed (reason %q)\nserve:\n%s", when, r, k.stderr.String())
	}
}

func TestWidenAutoDoesNotReleaseTheWideningAnApprovedIDChangeLeftWaiting(t *testing.T) {
	k := newIDTaker(t, "widen: auto")
	k.start(t)
	k.takeID(t)
	k.refusesEvil(t, "the load that applies the approved id change")
	// s1.sh: the operator's next reload, nothing changed.
	k.reload(t)
	k.refusesEvil(t, "a later reload")
	// s1b.sh: the author publishes 2.0.1 with the same list.
	k.write(t, "com.b", "2.0.1", "b.example", "evil.example")
	k.reload(t)
	k.refusesEvil(t, "the load of 2.0.1")
	errs := k.stderr.String()
	if strings.Contains(errs, "widen: auto let it in") {
		t.Fatalf("widen: auto let com.b's widening in at f:\n%s", errs)
	}
	if !strings.Contains(errs, "widen: auto does not apply") || !strings.Contains(errs, "binds com.b to folder "+k.g) {
		t.Fatalf("serve does not say why widen: auto did not apply:\n%s", errs)
	}
	out, errs2, _ := runBinary(t, "state", "--state", k.state, "list")
	if !strings.Contains(out, "com.b 1.0.0 in force") {
		t.Fatalf("com.b's approved list was rewritten without an approval:\n%s%s", out, errs2)
	}
}

func TestWidenAutoDoesNotApplyWhereTheFolderGotItsIDByApprovalEvenAlone(t *testing.T) {
	k := newIDTaker(t, "widen: auto")
	k.start(t)
	k.takeID(t)
	if out, _, _ := runBinary(t, "state", "--state", k.state, "list"); !strings.Contains(out, "folder "+k.f+": com.b (taken by an approved id change or claim: widen: auto and pin_digest do not apply here)") {
		t.Fatalf("state list does not say f took com.b by approval:\n%s", out)
	}
	// g is gone: f now holds com.b on its own, but by the approval whose
	// preview said the widening still waits.
	if out, errs, code := runBinary(t, "state", "--state", k.state, "forget", "--folder", k.g); code != exitOK {
		t.Fatalf("forget --folder g: exit %d\n%s%s", code, out, errs)
	}
	k.write(t, "com.b", "2.0.1", "b.example", "evil.example")
	k.reload(t)
	k.refusesEvil(t, "the load of 2.0.1 with f alone bound to com.b")
	errs := k.stderr.String()
	if !strings.Contains(errs, "widen: auto does not apply") || !strings.Contains(errs, "by an approved id change") {
		t.Fatalf("serve does not say why widen: auto did not apply:\n%s", errs)
	}
	// Nor does serve announce it as an exemption in force for com.b: it
	// is withheld there (the line was printed while it was not in force).
	if strings.Contains(errs, "exemption in force for com.b: widen:auto") || !strings.Contains(errs, "exemption in force for com.a: widen:auto") {
		t.Fatalf("serve announces widen: auto where it is not in force:\n%s", errs)
	}
}

func TestPinnedDigestDoesNotReleaseTheWideningAnApprovedIDChangeLeftWaiting(t *testing.T) {
	// The digest of com.b 2.0.1's list (b.example evil.example): the pin an
	// operator who reviewed that list for f would write.
	pin := filepath.Join(t.TempDir(), "p")
	os.Mkdir(pin, 0o755)
	erpFolder(t, pin, "com.b", "2.0.1", "b.example", "evil.example")
	out, _, _ := runBinary(t, "check", "--json", filepath.Join(pin, "manifest.json"))
	digest := regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindString(out)
	if digest == "" {
		t.Fatalf("check printed no digest:\n%s", out)
	}
	k := newIDTaker(t, `pin_digest: "`+digest+`"`)
	k.start(t)
	k.takeID(t)
	k.refusesEvil(t, "the load that applies the approved id change")
	k.write(t, "com.b", "2.0.1", "b.example", "evil.example")
	k.reload(t)
	k.refusesEvil(t, "the load of 2.0.1, whose digest is pinned")
	if errs := k.stderr.String(); !strings.Contains(errs, "pin_digest does not apply") {
		t.Fatalf("serve does not say why pin_digest did not apply:\n%s", errs)
	}
}
