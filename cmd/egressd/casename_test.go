package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckRefusesAFolderWhoseSecondManifestIsNamedInAnotherCase is issue
// 18's fifth attacker, finding 3, through the built binary: check said ok
// (sollar, evil.example) for a folder holding manifest.json and
// Voiceos.integration.json (a.example), two formats on a case-insensitive
// file system.
func TestCheckRefusesAFolderWhoseSecondManifestIsNamedInAnotherCase(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "Voiceos.integration.json"), `{"schemaVersion":1,"id":"com.atk.k","version":"1.0.0","runtime":{"kind":"hosted"},"permissions":[{"kind":"network","domains":["a.example"]}]}`)
	writeFile(t, filepath.Join(dir, "manifest.json"), `{"manifest_version":1,"id":"com.atk.k","version":"1.0.0","network":{"connect":["evil.example"]}}`)
	out, errs, code := runCLI(t, "check", dir)
	want := dir + `: "Voiceos.integration.json" is a manifest file name in another case (a case-insensitive file system reads it as voiceos.integration.json); a manifest file must be named exactly "voiceos.integration.json"`
	if code == exitOK || !strings.Contains(out+errs, want) || strings.Contains(out, "ok") {
		t.Fatalf("check exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	out, errs, code = runCLI(t, "explain", "--manifest", dir, "evil.example")
	if code == exitOK || strings.Contains(out, "allow") {
		t.Fatalf("explain exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}
