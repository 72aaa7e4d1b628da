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

// TestCheckEscapesInvisibleCharactersInManifestKeys is issue 18's
// ninth-round cosmetic break: U+200B (zero-width space, format) and U+3164
// (Hangul filler, default-ignorable) reached check's key paths as they
// were, so "net\u200bwork" read as "network" and a filler as a blank. They
// are escaped like the other characters a reader cannot see.
func TestCheckEscapesInvisibleCharactersInManifestKeys(t *testing.T) {
	m := filepath.Join(t.TempDir(), "manifest.json")
	writeFile(t, m, `{"manifest_version":1,"id":"com.a.b","version":"1.0.0","network":{"connect":[],"con\u200bnect":1,"\u3164":2}}`)
	out, errs, code := runCLI(t, "check", m)
	if code != exitFail || strings.ContainsAny(out+errs, "\u200b\u3164") || !strings.Contains(out+errs, `con\u200bnect`) || !strings.Contains(out+errs, `\u3164`) {
		t.Fatalf("check: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
}
