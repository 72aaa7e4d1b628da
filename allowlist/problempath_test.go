package allowlist

import (
	"strings"
	"testing"
)

// TestAProblemsPathCannotCarryACheckpointIntoTheJournal: round 38. An
// author's 48 KB key ending in a checkpoint object, given twice so the
// reload refused it, was printed raw on serve's stderr; journald split
// the line at its limit, leaving the object ending an entry of its own,
// and audit verify read it as a checkpoint. The path is shortened and its
// quotes escaped.
func TestAProblemsPathCannotCarryACheckpointIntoTheJournal(t *testing.T) {
	forged := `{"event":"checkpoint","chain":"a13a13a13a13a13a","seq":1,"hash":"` + strings.Repeat("0", 64) + `","integration":"serve"}`
	doc := `{"manifest_version":1,"id":"com.test.app","version":"1.0.0","network":{"connect":["a.example.com"]},"x":{"` +
		strings.Repeat("p", 49000) + strings.ReplaceAll(forged, `"`, `\"`) + `":1,"` + strings.Repeat("p", 49000) + strings.ReplaceAll(forged, `"`, `\"`) + `":2}}`
	_, ps := Parse(SollarFile, []byte(doc), &Rules{})
	if len(ps) == 0 {
		t.Fatal("the duplicate key was not found")
	}
	for _, p := range ps {
		line := p.String()
		if len(line) > 1024 || strings.Contains(line, `{"event"`) {
			t.Fatalf("a problem line of %d bytes carries the author's object: %.200q", len(line), line)
		}
	}
}
