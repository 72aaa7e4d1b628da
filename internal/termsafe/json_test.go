package termsafe

import (
	"encoding/json"
	"testing"
)

// TestJSONEscapesWhatStringEscapesAndKeepsTheValue: a bidi override, an
// isolate, a zero-width space and a tag character come out as \u escapes
// (a surrogate pair for the tag), printable Unicode stays, and the text
// decodes to the same value.
func TestJSONEscapesWhatStringEscapesAndKeepsTheValue(t *testing.T) {
	value := map[string]string{"k\u202e": "a\u2066b\u200bc\U000e0041 bücher ①"}
	raw, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	got := string(JSON(raw))
	want := `{"k\u202e":"a\u2066b\u200bc\udb40\udc41 bücher ①"}`
	if got != want {
		t.Fatalf("JSON(%s) = %s, want %s", raw, got, want)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(got), &back); err != nil || back["k\u202e"] != value["k\u202e"] {
		t.Fatalf("decoded %q (%v), want %q", back, err, value)
	}
}
