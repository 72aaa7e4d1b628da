package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExplainDoesNotJudgeAnIntegrationByAnotherEntryWhoseManifestLinksToIt:
// round 34's explainlie.sh. explain picked the config entry by inode, the
// last match winning, so an author whose manifest is a link to another
// integration's, listed after it, made explain judge that integration
// with the author's entry: its allow_ports dropped, "deny" printed for
// what serve lets through. Entries are matched by place as serve keys
// them, and a deploy link is a place apart from the release it names.
func TestExplainDoesNotJudgeAnIntegrationByAnotherEntryWhoseManifestLinksToIt(t *testing.T) {
	root := t.TempDir()
	victim := erpFolder(t, mkdir(t, filepath.Join(root, "victim")), "com.test.victim", "1.0.0", "a.example.com")
	evil := mkdir(t, filepath.Join(root, "evil"))
	if err := os.Symlink(filepath.Join(victim, "manifest.json"), filepath.Join(evil, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(root, "egressd.yaml")
	writeFile(t, cfg, "integrations:\n  - manifest: "+victim+"\n    listen: 127.0.0.1:3128\n    allow_ports: [8443]\n"+
		"  - manifest: "+evil+"\n    listen: 127.0.0.1:3129\n")
	out, errs, code := runCLI(t, "explain", "--config", cfg, "--manifest", victim, "a.example.com:8443")
	if code != exitOK || !strings.Contains(out, "exemption: allow_port:8443") {
		t.Fatalf("the victim judged by the evil entry: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = runCLI(t, "explain", "--config", cfg, "--manifest", evil, "a.example.com:8443")
	if code != exitFail || !strings.HasPrefix(out, "deny port_not_allowed") {
		t.Fatalf("the evil entry lent the victim's allow_ports: exit %d\n%s%s", code, out, errs)
	}
	// The config names a deploy link; the release folder it names is
	// another place to serve, so no entry lends it anything.
	current := filepath.Join(root, "current")
	if err := os.Symlink(victim, current); err != nil {
		t.Fatal(err)
	}
	writeFile(t, cfg, "integrations:\n  - manifest: "+current+"\n    listen: 127.0.0.1:3128\n    allow_ports: [8443]\n")
	if out, errs, code := runCLI(t, "explain", "--config", cfg, "--manifest", current, "a.example.com:8443"); code != exitOK {
		t.Fatalf("the link the config names: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := runCLI(t, "explain", "--config", cfg, "--manifest", victim, "a.example.com:8443"); code != exitFail {
		t.Fatalf("the release folder judged by the link's entry: exit %d\n%s%s", code, out, errs)
	}
}

// TestExplainWithAConfigButNoStateSaysItDidNotReadTheConfigsVersionMemory:
// round 34: explain --config without --state said "allow" for a widening
// serve refuses while it waits for approval in the config's state_dir, and
// did not say that version memory was not read.
func TestExplainWithAConfigButNoStateSaysItDidNotReadTheConfigsVersionMemory(t *testing.T) {
	root := t.TempDir()
	app := erpFolder(t, mkdir(t, filepath.Join(root, "app")), "com.test.app", "1.0.0", "a.example.com")
	state := filepath.Join(root, "state")
	cfg := filepath.Join(root, "egressd.yaml")
	writeFile(t, cfg, "state_dir: "+state+"\nintegrations:\n  - manifest: "+app+"\n    listen: 127.0.0.1:3128\n")
	_, errs, _ := runCLI(t, "explain", "--config", cfg, "--manifest", app, "a.example.com")
	if !strings.Contains(errs, "version memory was not read") || !strings.Contains(errs, "--state "+state) {
		t.Fatalf("explain does not say it skipped the config's version memory:\n%s", errs)
	}
	if _, errs, _ := runCLI(t, "explain", "--config", cfg, "--state", state, "--manifest", app, "a.example.com"); strings.Contains(errs, "not read") {
		t.Fatalf("a note with --state given:\n%s", errs)
	}
}

// TestCheckOfAConfigFileAsAManifestSaysToUseConfig: round 36's README
// walk: "egressd check configs/egressd.yaml" answered only "not valid
// JSON at line 1, column 1".
func TestCheckOfAConfigFileAsAManifestSaysToUseConfig(t *testing.T) {
	out, errs, code := runCLI(t, "check", mustAbs(t, "../../configs/egressd.yaml"))
	if code != exitFail || !strings.Contains(out+errs, "check it with egressd check --config") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}
