package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/egressd/egressd/policy"
)

// TestServeSaysOnStderrWhenAManifestReloadFails is issue 13's B5: the
// operator narrows a list with a typo (a trailing comma); the reload keeps
// the wider list, which only the audit log said (kept_last_good). The
// journal now gets one line: the manifest, the problem, and that the last
// good list stays in force.
func TestServeSaysOnStderrWhenAManifestReloadFails(t *testing.T) {
	dir := t.TempDir()
	integ := filepath.Join(dir, "weather")
	os.Mkdir(integ, 0o755)
	manifest := filepath.Join(integ, "manifest.json")
	os.WriteFile(manifest, weatherManifest("1.0.0", `"api.weather.example","compromised.example"`), 0o644)
	auditFile := filepath.Join(dir, "audit.log")
	sv := startServe(t, "--manifest", integ, "--listen", "127.0.0.1:0", "--state", t.TempDir(), "--resolver", "127.0.0.1:9", "--audit-log", auditFile)
	os.WriteFile(manifest, []byte("{\"manifest_version\":1,\"id\":\"com.test.weather\",\"version\":\"1.1.0\",\n\"network\":{\"connect\":[\"api.weather.example\",]}}"), 0o644)
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"action":"kept_last_good"`)
	line := waitFor(t, &sv.stderr, `egressd: warning: reload: `+regexp.QuoteMeta(integ)+`: .*`)[0]
	if !strings.Contains(line, "not valid JSON at line 2") || !strings.Contains(line, "the last good policy (com.test.weather 1.0.0) stays in force") || strings.Contains(line, `\x0a`) {
		t.Fatalf("stderr line: %q", line)
	}
	if r := connectReason(t, sv.listen, "compromised.example"); r != "dns_error" { // still allowed: the last good list
		t.Fatalf("compromised.example: %s", r)
	}
	sv.stop(t)
}

// TestRunRefusalOfARollbackIsOneCleanLine is issue 13's note on B3: run's
// refusal of a version lower than one seen read "DIR:\x0aversion 1.2.0 is
// lower…": the line break between the folder and the message reached the
// terminal escaped. It is one line, with the folder and the way out.
func TestRunRefusalOfARollbackIsOneCleanLine(t *testing.T) {
	state, dir := t.TempDir(), t.TempDir()
	loadAsServe(t, state, erpFolder(t, dir, "com.acme.erp", "9.0.0", "erp.acme.example"))
	erpFolder(t, dir, "com.acme.erp", "1.2.0", "erp.acme.example")
	_, errs, code := runCLI(t, "run", "--state", state, dir, "--", "/bin/true")
	want := "egressd run: " + dir + ": version 1.2.0 is lower than 9.0.0, seen before"
	if code != exitFail || !strings.HasPrefix(errs, want) || strings.Count(errs, "\n") != 1 || strings.Contains(errs, `\x0a`) {
		t.Fatalf("exit %d: %q", code, errs)
	}
}

// TestServeKeepsTheLastGoodPolicyWhenVersionMemoryVanishes is issue 13's
// B4: with 2.0.0 pending, versions.json is moved away (a backup job, a
// sloppy cleanup) and 3.0.0 adds another host: the next reload read the
// missing file as empty memory, a first load, and allowed both hosts. A
// running serve never reads a state file it has read before as empty: the
// reload keeps the last good policy and says why; and a new process finds
// versions.lock, which egressd never removes, and refuses to start.
func TestServeKeepsTheLastGoodPolicyWhenVersionMemoryVanishes(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	integ := filepath.Join(dir, "weather")
	os.Mkdir(integ, 0o755)
	manifest := filepath.Join(integ, "manifest.json")
	os.WriteFile(manifest, weatherManifest("1.0.0", `"api.weather.example"`), 0o644)
	auditFile := filepath.Join(dir, "audit.log")
	args := []string{"--manifest", integ, "--listen", "127.0.0.1:0", "--state", state, "--resolver", "127.0.0.1:9", "--audit-log", auditFile}
	sv := startServe(t, args...)
	os.WriteFile(manifest, weatherManifest("2.0.0", `"api.weather.example","b.weather.example"`), 0o644)
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"action":"pending","pending":"2.0.0"`)

	stateFile := filepath.Join(state, "versions.json")
	if err := os.Rename(stateFile, filepath.Join(dir, "versions.json.moved")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(manifest, weatherManifest("3.0.0", `"api.weather.example","b.weather.example","evil.example"`), 0o644)
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"action":"kept_last_good"`)
	waitFor(t, &sv.stderr, `egressd: warning: reload: .*`+regexp.QuoteMeta(stateFile)+` .*vanished`)
	for host, want := range map[string]string{"b.weather.example": "pending_approval", "evil.example": "not_allowlisted"} {
		if r := connectReason(t, sv.listen, host); r != want {
			t.Errorf("%s: %s, want %s", host, r, want)
		}
	}
	sv.stop(t)

	// A new process: the lock shows version memory was here.
	var stderr lockedBuffer
	if code := serve(context.Background(), args, io.Discard, &stderr, make(chan os.Signal)); code == 0 || !strings.Contains(stderr.String(), stateFile) {
		t.Fatalf("restart without the state file: exit %d\n%s", code, stderr.String())
	}
	if _, errs, code := runCLI(t, "run", "--state", state, integ, "--", "/bin/true"); code == exitOK || !strings.Contains(errs, stateFile+" is missing, but") {
		t.Fatalf("run without the state file: exit %d\n%s", code, errs)
	}
}

// TestServeKeepsTheLastGoodPolicyWhenVersionMemoryIsReplacedByAnEmptyOne:
// a missing versions.json was refused, but one replaced by a valid empty
// memory ({"egressd_state":2,"ids":{},"folders":{}}, a template or a
// reprovisioned file) read as "nothing seen": the next reload loaded the
// pending widening as a first load, with no warning (round 12 trust-chain
// attacker). A running serve that read ids from its version memory never
// takes a memory holding none as the truth: the reload keeps the last good
// policy and says why.
func TestServeKeepsTheLastGoodPolicyWhenVersionMemoryIsReplacedByAnEmptyOne(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	sv, _, manifest, auditFile := weatherServe(t, dir, state)
	os.WriteFile(manifest, weatherManifest("1.0.1", `"api.weather.example","evil.example"`), 0o644)
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"action":"pending","pending":"1.0.1"`)

	stateFile := filepath.Join(state, "versions.json")
	empty := filepath.Join(state, "versions.json.new")
	os.WriteFile(empty, []byte(`{"egressd_state":2,"ids":{},"folders":{}}`+"\n"), 0o600)
	if err := os.Rename(empty, stateFile); err != nil {
		t.Fatal(err)
	}
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"action":"kept_last_good"`)
	waitFor(t, &sv.stderr, `egressd: warning: reload: .*`+regexp.QuoteMeta(stateFile)+` .*remembers no integration`)
	if r := connectReason(t, sv.listen, "evil.example"); r != "pending_approval" {
		t.Errorf("evil.example: %s, want pending_approval", r)
	}
	sv.stop(t)
}

// TestServeKeepsTheLastGoodPolicyWhenVersionMemoryLosesAnID is round 47's
// F3: an older versions.json restored under a running serve still held
// other ids but not com.test.weather, so its next reload was a first load:
// the widening loaded with no approval, and no warning. Round 48: one that
// kept the id but had lost the folder's binding let an id change load as a
// new folder's, and one that remembered a lower version let a rollback
// load with a host the later version had removed. A running serve
// compares a read with the whole state it last read or wrote.
func TestServeKeepsTheLastGoodPolicyWhenVersionMemoryLosesAnID(t *testing.T) {
	for _, c := range []struct {
		name, want, manifest string
		older                func(doc map[string]any)
		// waiting, if set, is a manifest serve loads first, whose change
		// waits for approval when the older copy is restored.
		waiting string
	}{
		{"id lost", `no longer remembers com\.test\.weather`, string(weatherManifest("1.0.1", `"api.weather.example","evil.example"`)),
			func(doc map[string]any) { // another id's record, none for com.test.weather
				ids := doc["ids"].(map[string]any)
				ids["com.test.other"], doc["folders"] = ids["com.test.weather"], map[string]any{}
				delete(ids, "com.test.weather")
			}, ""},
		{"binding lost", `no longer binds .* to com\.test\.weather`, `{"manifest_version":1,"id":"com.evil.x","version":"1.0.0","network":{"connect":["evil.example"]}}`,
			func(doc map[string]any) { doc["folders"] = map[string]any{} }, ""},
		// Round 50: a copy that binds the folder "by approval" to an id no
		// change waited for when serve last read the state.
		{"binding moved by approval", `no longer binds .* to com\.test\.weather`, `{"manifest_version":1,"id":"com.evil.x","version":"1.0.0","network":{"connect":["evil.example"]}}`,
			func(doc map[string]any) {
				ids := doc["ids"].(map[string]any)
				evil := map[string]any{"version": "1.0.0", "digest": "sha256:" + strings.Repeat("0", 64), "approved": map[string]any{"version": "1.0.0", "digest": "sha256:" + strings.Repeat("0", 64), "entries": []string{"evil.example"}}}
				ids["com.evil.x"] = evil
				for place := range doc["folders"].(map[string]any) {
					doc["folders"].(map[string]any)[place] = map[string]any{"id": "com.evil.x", "by_approval": true}
				}
			}, ""},
		// Round 51: a copy that binds the folder "by approval" to the id
		// whose change waited there, but at an older version and list than
		// the one that waited (com.evil.x 1.0.0 with evil.example, where
		// com.evil.x 2.0.0 waited).
		{"binding moved by approval to an older list of the id that waited", `no longer binds .* to com\.test\.weather`, `{"manifest_version":1,"id":"com.evil.x","version":"1.0.0","network":{"connect":["evil.example"]}}`,
			func(doc map[string]any) {
				sum := sha256.Sum256([]byte("evil.example"))
				digest := "sha256:" + hex.EncodeToString(sum[:])
				doc["ids"].(map[string]any)["com.evil.x"] = map[string]any{"version": "1.0.0", "digest": digest, "approved": map[string]any{"version": "1.0.0", "digest": digest, "entries": []string{"evil.example"}}}
				for place := range doc["folders"].(map[string]any) {
					doc["folders"].(map[string]any)[place] = map[string]any{"id": "com.evil.x", "by_approval": true}
				}
			}, `{"manifest_version":1,"id":"com.evil.x","version":"2.0.0","network":{"connect":["api.weather.example"]}}`},
		{"version lowered", `remembers com\.test\.weather at version 0\.9\.0`, string(weatherManifest("1.0.1", `"api.weather.example","evil.example"`)),
			func(doc map[string]any) {
				r := doc["ids"].(map[string]any)["com.test.weather"].(map[string]any)
				r["version"] = "0.9.0"
				r["approved"].(map[string]any)["version"] = "0.9.0"
			}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, state := t.TempDir(), t.TempDir()
			sv, _, manifest, auditFile := weatherServe(t, dir, state)
			if c.waiting != "" {
				os.WriteFile(manifest, []byte(c.waiting), 0o644)
				sv.sig <- syscall.SIGHUP
				waitFor(t, &lockedFile{path: auditFile}, `"action":"pending"`)
			}
			stateFile := filepath.Join(state, "versions.json")
			data, err := os.ReadFile(stateFile)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			c.older(doc)
			older, _ := json.Marshal(doc)
			restoreUnder(t, sv, stateFile, older, auditFile, c.want, func() { os.WriteFile(manifest, []byte(c.manifest), 0o644) })
			if r := connectReason(t, sv.listen, "evil.example"); r != "not_allowlisted" {
				t.Errorf("evil.example: %s, want not_allowlisted (the last good list)", r)
			}
			sv.stop(t)
		})
	}
}

// TestServeTakesAnApprovedIDChangeAnotherProcessLoaded is round 49's B1:
// serve held folder X's change from com.test.weather to com.test.beta as
// pending; the operator approved it and an egressd run sharing the state
// loaded it, binding X to com.test.beta. serve then refused every reload,
// reading the moved binding as an older copy restored. A binding moved by
// an approved change is the operator's: the reload takes it.
func TestServeTakesAnApprovedIDChangeAnotherProcessLoaded(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	sv, integ, manifest, auditFile := weatherServe(t, dir, state)
	os.WriteFile(manifest, []byte(`{"manifest_version":1,"id":"com.test.beta","version":"1.0.0","network":{"connect":["api.weather.example"]}}`), 0o644)
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"action":"pending"`)
	if out, errs, code := runCLI(t, "approve", "--yes", "--state", state, "--manifest", integ); code != exitOK {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errs)
	}
	if o := loadAsServe(t, state, integ); o.Result != policy.Loaded { // another process loads it
		t.Fatalf("the other process's load: %+v", o)
	}
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"integration":"com\.test\.beta".*"action":"(loaded|unchanged)"`)
	sv.stop(t)
	if strings.Contains(sv.stderr.String(), "no longer binds") {
		t.Fatalf("serve refused the reload:\n%s", sv.stderr.String())
	}
}

// restoreUnder puts data in place of stateFile as a restore does (written
// beside it, renamed over it), runs then (if any), reloads sv, and waits
// for it to keep its last good policy with a warning naming the state
// file and matching want.
func restoreUnder(t *testing.T, sv *served, stateFile string, data []byte, auditFile, want string, then func()) {
	t.Helper()
	restored := stateFile + ".old"
	os.WriteFile(restored, data, 0o600)
	if err := os.Rename(restored, stateFile); err != nil {
		t.Fatal(err)
	}
	if then != nil {
		then()
	}
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"action":"kept_last_good"`)
	waitFor(t, &sv.stderr, `egressd: warning: reload: .*`+regexp.QuoteMeta(stateFile)+` `+want)
}

// weatherServe starts serve on dir/weather holding com.test.weather 1.0.0
// (api.weather.example), with version memory in state and the audit log in
// dir/audit.log.
func weatherServe(t *testing.T, dir, state string) (sv *served, integ, manifest, auditFile string) {
	t.Helper()
	integ = filepath.Join(dir, "weather")
	os.Mkdir(integ, 0o755)
	manifest = filepath.Join(integ, "manifest.json")
	os.WriteFile(manifest, weatherManifest("1.0.0", `"api.weather.example"`), 0o644)
	auditFile = filepath.Join(dir, "audit.log")
	sv = startServe(t, "--manifest", integ, "--listen", "127.0.0.1:0", "--state", state, "--resolver", "127.0.0.1:9", "--audit-log", auditFile)
	return sv, integ, manifest, auditFile
}

// TestServeRefusesAnOlderCopyOfVersionMemoryThatUndoesTheOperatorsLaterWord
// is round 52's f1: a copy of versions.json taken while an approved id
// change was in force (the folder bound, "by approval", to the id and list
// that had waited) was restored after the operator had approved the change
// back and the same change waited again. Every binding the running serve
// compared matched a change that had waited, so the reload put the
// waiting change in force with no approval. Every write counts up: a read
// that holds fewer writes than this process saw is an older copy.
func TestServeRefusesAnOlderCopyOfVersionMemoryThatUndoesTheOperatorsLaterWord(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	sv, integ, manifest, auditFile := weatherServe(t, dir, state)
	stateFile := filepath.Join(state, "versions.json")
	evil := `{"manifest_version":1,"id":"com.evil.x","version":"1.0.0","network":{"connect":["api.weather.example","evil.example"]}}`
	approveAndLoad := func(want string) {
		t.Helper()
		if out, errs, code := runCLI(t, "approve", "--yes", "--state", state, "--manifest", integ); code != exitOK {
			t.Fatalf("approve: exit %d\n%s%s", code, out, errs)
		}
		sv.sig <- syscall.SIGHUP
		waitFor(t, &lockedFile{path: auditFile}, want)
	}
	os.WriteFile(manifest, []byte(evil), 0o644)
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"action":"pending"`)
	approveAndLoad(`"integration":"com\.evil\.x".*"action":"loaded"`)
	backup, err := os.ReadFile(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(manifest, weatherManifest("1.0.0", `"api.weather.example"`), 0o644)
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `(?s)"action":"pending".*"action":"pending"`)
	approveAndLoad(`(?s)"integration":"com\.evil\.x".*"action":"loaded".*"integration":"com\.test\.weather".*"action":"loaded"`)
	os.WriteFile(manifest, []byte(evil), 0o644)
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `(?s)("action":"pending".*){3}`)
	if r := connectReason(t, sv.listen, "evil.example"); r != "pending_approval" {
		t.Fatalf("evil.example while the change waits again: %s", r)
	}
	restoreUnder(t, sv, stateFile, backup, auditFile, `holds write \d+ of version memory, older than write \d+`, nil)
	if r := connectReason(t, sv.listen, "evil.example"); r != "pending_approval" {
		t.Errorf("evil.example after the older copy was restored: %s, want pending_approval (the last good policy)", r)
	}
	sv.stop(t)
}

// TestServeTakesAReloadAfterManyWritesByOtherProcesses is round 54's f1:
// another integration's author bumped its version 66 times, each loaded
// by another process sharing the state folder, between two of serve's
// reloads; the lineage (64 writes then) no longer named the write serve
// had seen, and serve refused every reload until restarted, blaming a
// restored copy. The lineage holds 256 writes, and serve reads version
// memory every second (KeepUp, TestAProcessThatKeepsUpFollowsAnyNumberOfWritesByOthers).
func TestServeTakesAReloadAfterManyWritesByOtherProcesses(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	sv, _, manifest, auditFile := weatherServe(t, dir, state)
	other := filepath.Join(dir, "other")
	os.Mkdir(other, 0o755)
	for i := 0; i <= 70; i++ {
		if o := loadAsServe(t, state, erpFolder(t, other, "com.test.other", fmt.Sprintf("1.0.%d", i), "other.example")); o.Result != policy.Loaded {
			t.Fatalf("the other process's load %d: %+v", i, o)
		}
	}
	os.WriteFile(manifest, weatherManifest("1.0.1", `"api.weather.example"`), 0o644)
	sv.sig <- syscall.SIGHUP
	waitFor(t, &lockedFile{path: auditFile}, `"integration_version":"1\.0\.1".*"action":"loaded"`)
	sv.stop(t)
	if strings.Contains(sv.stderr.String(), "warning: reload") {
		t.Fatalf("serve refused the reload:\n%s", sv.stderr.String())
	}
}
