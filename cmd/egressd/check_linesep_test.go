package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckEscapesUnicodeLineSeparatorsFromManifestKeys is issue 18's
// break 6 (f18b): egressd check printed a key's U+2028 and U+2029 as they
// were, so a viewer that breaks lines there showed a forged "ok" line.
func TestCheckEscapesUnicodeLineSeparatorsFromManifestKeys(t *testing.T) {
	forged := filepath.Join(t.TempDir(), "manifest.json")
	writeFile(t, forged, `{"manifest_version":1,"id":"com.a.b","version":"1.0.0","network":{"connect":[],"x\u2028`+forged+`: ok com.a.b 1.0.0 (sollar) entries: evil.example\u2029":1}}`)
	out, errs, code := runCLI(t, "check", forged)
	if code != exitFail || strings.ContainsAny(out+errs, "\u2028\u2029") || !strings.Contains(out+errs, `x\u2028`) {
		t.Fatalf("check: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
}
