package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckJSONEscapesABidiOverrideInAManifestKey is round 27's item 4:
// check's text output escapes a manifest key's U+202E, but check --json
// printed it raw, so a reviewer reading the JSON in a terminal or a web
// view saw the message reversed. The JSON now holds every rune termsafe
// escapes as \uXXXX: valid JSON, the same data.
func TestCheckJSONEscapesABidiOverrideInAManifestKey(t *testing.T) {
	file := filepath.Join(t.TempDir(), "voiceos.integration.json")
	writeFile(t, file, `{"schemaVersion":1,"id":"com.test.bidi","version":"1.0.0","name":"x","summary":"x","publisher":{"id":"p","name":"p"},`+
		`"runtime":{"kind":"local-mcp","command":"true","args":[]},"permissions":[{"kind":"network","domains":["a.example"]}],"tools":[],"\u001bx\u202egnp.exe\u2066":1}`)
	text, _, _ := runCLI(t, "check", file)
	if !strings.Contains(text, `x\u202egnp.exe\u2066`) {
		t.Fatalf("the text output does not name the key escaped, so this test proves nothing:\n%s", text)
	}
	out, _, _ := runCLI(t, "check", "--json", file)
	if strings.ContainsAny(out, "\u202e\u2066") || !strings.Contains(out, `\u202e`) {
		t.Fatalf("check --json prints the key's bidi controls raw:\n%s", out)
	}
	var reports []checkReport
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatalf("check --json is not JSON: %v\n%s", err, out)
	}
	if len(reports) != 1 || !strings.Contains(strings.Join(append(reports[0].Errors, reports[0].Warnings...), " "), "\x1bx\u202egnp.exe\u2066") {
		t.Fatalf("the decoded JSON does not hold the key as it is: %+v", reports)
	}
}
