package termsafe

import (
	"os"
	"os/exec"
	"testing"
)

// TestAPrintedWordPastesAsTheBytesItNames: ShellWord put a folder holding
// U+3164 (a Hangul filler, which termsafe shows as \u3164) in plain
// single quotes; printed through termsafe it read '…\u3164', which bash
// passes as a literal backslash-u: the pasted approve command approved
// another folder, literally named "vendor\u3164" (round 17 trust-chain
// attacker, MEDIUM). Whatever a word holds, termsafe leaves ShellWord's
// output as it is, and bash reads it back as the same bytes.
func TestAPrintedWordPastesAsTheBytesItNames(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no bash")
		}
		t.Skip("no bash")
	}
	for _, s := range []string{
		"/srv/vendor\u3164", `/srv/vendor\u3164`, "/srv/a\u034fb", "/srv/\u115f", "/srv/\u17b4", "/srv/x\ufe0f", "/srv/\uffa0",
		"/srv/erp\u2800", "/srv/a\u00a0b", "/srv/w\tx", `/srv/w\tx`, "/srv/it's", "/srv/caf\u00e9", "/srv/\xff\xfe", `/srv/a\\b`, "/srv/\x1b[2J",
		"/srv/plain", "/srv/with space",
	} {
		word := ShellWord(s)
		if shown := String(word); shown != word {
			t.Errorf("ShellWord(%q) = %s, shown on a terminal as %s: pasted, it is another word", s, word, shown)
		}
		out, err := exec.Command(bash, "-c", "printf %s "+word).Output()
		if err != nil || string(out) != s {
			t.Errorf("bash reads ShellWord(%q) = %s as %q (%v)", s, word, out, err)
		}
	}
	if ShellWord("/srv/vendor\u3164") == ShellWord(`/srv/vendor\u3164`) {
		t.Error("a folder holding U+3164 and one named with the six characters \\u3164 are printed alike")
	}
}
