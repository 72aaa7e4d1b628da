package selftest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestSelftestOutputNeverPaintsOrReordersTheTerminal: a detail the probes
// bring back (a file name, a resolver's answer) may hold an escape
// sequence or a bidi override. The table shows them escaped, and --json
// writes them as \u escapes: the same JSON value, nothing for a terminal
// to act on.
func TestSelftestOutputNeverPaintsOrReordersTheTerminal(t *testing.T) {
	detail := "reached \x1b[2Jevil\u202egpj.exe"
	r := Report{Probes: []Result{{Name: "walk\u2066", Layer: LayerFS, Result: Open, Detail: detail}}, Host: Host{Kernel: "6.1\x1b]0;x\x07"}}
	var table bytes.Buffer
	WriteTable(&table, r)
	var js bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"table": table.String(), "json": js.String()} {
		if strings.ContainsAny(out, "\x1b\x07\u202e\u2066") {
			t.Errorf("%s output holds a raw escape or bidi character:\n%q", name, out)
		}
	}
	var back struct {
		Probes []Result `json:"probes"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Probes) != 1 || back.Probes[0].Detail != detail {
		t.Fatalf("--json is not the same value: %v %+v", err, back.Probes)
	}
}
