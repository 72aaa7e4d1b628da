package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// forgedConnect is a refusal of exfil.attacker.example, appended by hand
// to a real log: it links to nothing and its hash is no hash.
const forgedConnect = `{"level":"warn","time":"2026-12-01T15:24:53Z","event":"connect","integration":"com.test.weather","integration_version":"1.0.0","generation":1,"decision":"deny","reason":"not_allowlisted","host":"exfil.attacker.example","host_raw":"exfil.attacker.example:443","port":443,"conn":"c-x-9","method":"CONNECT","seq":99,"prev":"00","hash":"00"}` + "\n"

// egressdCLI runs the real binary and returns what it printed and its exit
// status.
func egressdCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(egressdBinary(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// TestSuggestRefusesARealServeLogWithAForgedConnectAppended: one forged
// connect line appended to a real serve log made suggest put the forged
// host in the permission it suggests, exit 0, not a word. suggest verifies
// as report does: a log that does not verify gets nothing on stdout, one
// line on stderr naming why and the verify command, exit 1; --unverified
// prints the suggestion under the LOG NOT VERIFIED banner, still exit 1.
func TestSuggestRefusesARealServeLogWithAForgedConnectAppended(t *testing.T) {
	dir := t.TempDir()
	sp := startServeProcess(t, serveDir(t, dir, ""))
	if got := connectReason(t, sp.listen, "api.weather.example"); got != "dns_error" {
		t.Fatalf("CONNECT api.weather.example: reason %q, want dns_error (allowed, no resolver)", got)
	}
	sp.stop(t)
	real := filepath.Join(dir, "audit.log")
	out, errs, code := egressdCLI(t, "audit", "suggest", real)
	// Unkeyed, no checkpoints given: suggested, and said to be unproven
	// (round 36: a forged line with the chain recomputed read "verified").
	if code != exitOK || !strings.Contains(out, `"api.weather.example"`) || !strings.Contains(errs, "the chain is unkeyed and no checkpoint was cross-checked") {
		t.Fatalf("the real log: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}

	data, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	forged := filepath.Join(dir, "forged.log")
	if err := os.WriteFile(forged, append(data, forgedConnect...), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errs, code = egressdCLI(t, "audit", "suggest", forged)
	if code != exitFail || out != "" || strings.Count(errs, "\n") != 1 ||
		!strings.Contains(errs, "LOG NOT VERIFIED") || !strings.Contains(errs, "egressd audit verify "+forged) {
		t.Fatalf("the forged log: exit %d, want %d, nothing on stdout and one line on stderr naming why and the verify command\nstdout:\n%s\nstderr:\n%s", code, exitFail, out, errs)
	}

	out, errs, code = egressdCLI(t, "audit", "suggest", "--unverified", forged)
	if code != exitFail || !strings.Contains(out, "exfil.attacker.example") || !strings.HasPrefix(errs, "egressd audit suggest: LOG NOT VERIFIED: BROKEN: ") {
		t.Fatalf("--unverified: exit %d, want the suggestion under the banner, exit %d\nstdout:\n%s\nstderr:\n%s", code, exitFail, out, errs)
	}
}

// TestSuggestOfAKeyedLogNeedsItsKey: a keyed log whose key is not given
// does not verify (only its links are checked), so suggest refuses it and
// says to pass the key; with --key it verifies and suggests.
func TestSuggestOfAKeyedLogNeedsItsKey(t *testing.T) {
	files, _ := realLog(t, true)
	_, errs, code := runCLI(t, append([]string{"audit", "suggest"}, files...)...)
	if code != exitFail || !strings.Contains(errs, "is keyed: pass its key") {
		t.Fatalf("keyed log without --key: exit %d\n%s", code, errs)
	}
	key := filepath.Join(filepath.Dir(files[0]), "audit.key")
	out, errs, code := runCLI(t, append([]string{"audit", "suggest", "--key", key}, files...)...)
	if code != exitOK || !strings.Contains(out, `"api.weather.example"`) {
		t.Fatalf("keyed log with --key: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}

// TestSuggestRefusesARunPlantedFromAnotherInstanceSharingTheKey: round 36.
// Two keyed serve instances share one key; only B was asked for
// evil.weather.example. B's log given before A's verifies line by line,
// but its runs are not linked: suggest put B's host in A's permission.
// It now refuses a log whose runs are not linked.
func TestSuggestRefusesARunPlantedFromAnotherInstanceSharingTheKey(t *testing.T) {
	key := filepath.Join(t.TempDir(), "audit.key")
	os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef"), 0o600)
	var logs []string
	for _, host := range []string{"evil.weather.example", "api.weather.example"} {
		dir := t.TempDir()
		sp := startServeProcess(t, serveDir(t, dir, "\n  key_file: "+key+"\n  key_id: k1"))
		connectReason(t, sp.listen, host)
		sp.stop(t)
		logs = append(logs, filepath.Join(dir, "audit.log"))
	}
	out, errs, code := runCLI(t, append([]string{"audit", "suggest", "--key", key}, logs...)...)
	if code != exitFail || strings.Contains(out, "evil.weather.example") || !strings.Contains(errs, "LOG NOT PROVEN") || !strings.Contains(errs, "runs not linked") {
		t.Fatalf("a planted run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if out, errs, _ := runCLI(t, "audit", "report", "--key", key, logs[0], logs[1]); !strings.Contains(strings.SplitN(out, "\n", 2)[0], "runs not linked") {
		t.Fatalf("the report's headline does not say the runs are not linked:\n%s%s", out, errs)
	}
}
