package policy

import (
	"strings"
	"testing"
)

// TestAHumanPasswordBoundAsASecretIsWarnedAboutAsGuessable: a guessable
// value bound to a host that shows data back can be learnt from a guess
// list planted by a way the request guard does not see (round 26), so
// check (and run and serve at start) warn about one: under 16 bytes, or
// letters and digits only under 20. Random keys pass quietly. The warning
// names the binding and the secret, never the value.
func TestAHumanPasswordBoundAsASecretIsWarnedAboutAsGuessable(t *testing.T) {
	for _, tc := range []struct {
		value string
		warn  bool
	}{
		{"Summer2019!", true},
		{"sunshine2019", true},
		{"Tr0ub4dor&3xyzq", true},       // 15 bytes
		{"correcthorse2019ab", true},    // 18 letters and digits
		{"9f3c2a7e51d04b6e", true},      // 16 hex: a short id, warned as the rule says
		{"correct-horse-2019", false},   // 18 with punctuation
		{"q7Vd2LmX9pR4tKz8WbN1", false}, // 20 letters and digits
		{"AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", false},
	} {
		cfg := Config{Integrations: []Integration{{Manifest: "/m/manifest.json", Secrets: []SecretSpec{
			{At: "integrations[0].secrets[0]", Name: "PASS", Value: []byte(tc.value)},
		}}}}
		_, warns := CheckConfig(cfg, nil)
		got := ""
		for _, w := range warns {
			if strings.Contains(w, "secrets[0]") {
				got = w
			}
		}
		if (got != "") != tc.warn {
			t.Errorf("%q: warning %q, want one: %v", tc.value, got, tc.warn)
		}
		if strings.Contains(got, tc.value) {
			t.Errorf("the warning holds the value: %q", got)
		}
		if tc.warn && !strings.HasPrefix(got, "/m/manifest.json: integrations[0].secrets[0]: the value of PASS ") {
			t.Errorf("the warning does not name the binding: %q", got)
		}
	}
}
