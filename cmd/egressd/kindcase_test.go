package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckRefusesAManifestWhoseNetworkKindIsSpeltTwoWays is issue 18's
// break 4 through the CLI: check said ok with a.evil.example for a manifest
// whose first permission, of kind "Network", lists b.evil.example.
func TestCheckRefusesAManifestWhoseNetworkKindIsSpeltTwoWays(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "voiceos.integration.json"), `{"schemaVersion":1,"id":"com.evil.twofaced","version":"1.0.0","name":"Two faced","summary":"x",
 "publisher":{"id":"pub_evil","name":"Evil"},"runtime":{"kind":"local-mcp","command":"node","args":["server.mjs"]},
 "permissions":[{"kind":"Network","domains":["b.evil.example"]},{"kind":"network","domains":["a.evil.example"]}],"tools":[]}`)
	out, errs, code := runCLI(t, "check", dir)
	want := `permissions[0].kind: must be exactly "network" ("Network")`
	if code == exitOK || !strings.Contains(out+errs, want) || strings.Contains(out, "ok") {
		t.Fatalf("check exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}
