package allowlist

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestManifestFileNamedInAnotherCaseIsRefused is issue 18's fifth
// attacker, finding 3: Voiceos.integration.json beside manifest.json
// passed as a Sollar manifest, though on a case-insensitive file system
// (macOS, Windows, a reviewer's checkout) that folder holds both formats,
// with different lists. A file whose name is a manifest's only after case
// folding is an error naming it and the exact name, by both ways a folder
// is loaded (by path, and through the folder held open).
func TestManifestFileNamedInAnotherCaseIsRefused(t *testing.T) {
	for _, c := range []struct {
		files []string
		want  string
	}{
		{[]string{"Voiceos.integration.json", SollarFile}, `"Voiceos.integration.json" is a manifest file name in another case (a case-insensitive file system reads it as voiceos.integration.json); a manifest file must be named exactly "voiceos.integration.json"`},
		{[]string{VoiceOSFile, "MANIFEST.JSON"}, `"MANIFEST.JSON" is a manifest file name in another case (a case-insensitive file system reads it as manifest.json); a manifest file must be named exactly "manifest.json"`},
		{[]string{"Manifest.json"}, `"Manifest.json" is a manifest file name in another case (a case-insensitive file system reads it as manifest.json); a manifest file must be named exactly "manifest.json"`},
		{[]string{"voiceo\u017f.integration.json", SollarFile}, `a manifest file must be named exactly "voiceos.integration.json"`}, // long s folds to s
	} {
		dir := t.TempDir()
		for _, f := range c.files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(`{"manifest_version":1,"id":"com.a.b","version":"1.0.0","network":{"connect":["a.example"]}}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Locate(dir); err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), dir) {
			t.Fatalf("%v: Locate = %v", c.files, err)
		}
		folder, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, err = LoadIn(folder, dir, nil)
		folder.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%v: LoadIn = %v", c.files, err)
		}
	}
}

// TestManifestFileNamedAsWindowsOpensItIsRefused: Windows opens
// "voiceos.integration.json." (a trailing dot), "voiceos.integration.json "
// (a trailing space) and "voiceos.integration.json::$DATA" (the default
// stream) as voiceos.integration.json, so beside manifest.json such a file
// is a second format with another list on a Windows host or checkout.
func TestManifestFileNamedAsWindowsOpensItIsRefused(t *testing.T) {
	for _, c := range []struct{ variant, want string }{
		{"voiceos.integration.json.", VoiceOSFile},
		{"voiceos.integration.json ", VoiceOSFile},
		{"voiceos.integration.json::$DATA", VoiceOSFile},
		{"voiceos.integration.json:hidden", VoiceOSFile},
		{"Voiceos.Integration.json. .", VoiceOSFile},
		{"manifest.json...", SollarFile},
	} {
		dir := t.TempDir()
		other := SollarFile
		if c.want == SollarFile {
			other = VoiceOSFile
		}
		for _, f := range []string{c.variant, other} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(`{"manifest_version":1,"id":"com.a.b","version":"1.0.0","network":{"connect":["evil.example"]}}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		want := `a manifest file must be named exactly "` + c.want + `"`
		if _, err := Locate(dir); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), strconvQuote(c.variant)) {
			t.Fatalf("%q: Locate = %v", c.variant, err)
		}
		folder, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, err = LoadIn(folder, dir, nil)
		folder.Close()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%q: LoadIn = %v", c.variant, err)
		}
	}
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }
