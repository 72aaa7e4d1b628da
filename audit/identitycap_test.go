package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Two integrations whose ids differ only after the field cap were one
// integration in the log: the writer kept the first 256 bytes and said
// nothing, so a hostile id's refusals read as its benign twin's. Whatever
// reaches the writer, two distinct identities never log the same, and a
// cut is marked with the original length.
func TestTwoIDsThatDifferAfterTheCapNeverLogTheSame(t *testing.T) {
	prefix := "com.a18." + strings.Repeat("x", 250)
	ids := []string{prefix + ".benign", prefix + ".hostile"}
	versions := []string{"1.0.0-" + strings.Repeat("a", 300) + "b", "1.0.0-" + strings.Repeat("a", 300) + "c"}
	var buf bytes.Buffer
	l, err := New(&buf, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range ids {
		ev := connectEvent()
		ev.Integration, ev.IntegrationVersion, ev.Pending, ev.Claim = ids[i], versions[i], ids[i]+" "+versions[i], "/srv/"+ids[i]
		if err := l.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	type line struct {
		Event       string `json:"event"`
		Integration string `json:"integration"`
		Version     string `json:"integration_version"`
		Pending     string `json:"pending"`
		Claim       string `json:"claim"`
	}
	var got []line
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ln line
		if err := json.Unmarshal(sc.Bytes(), &ln); err != nil {
			t.Fatal(err)
		}
		if ln.Event == string(Connect) {
			got = append(got, ln)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d connect lines", len(got))
	}
	for name, pair := range map[string][2]string{
		"integration":         {got[0].Integration, got[1].Integration},
		"integration_version": {got[0].Version, got[1].Version},
		"pending":             {got[0].Pending, got[1].Pending},
		"claim":               {got[0].Claim, got[1].Claim},
	} {
		if pair[0] == pair[1] {
			t.Errorf("%s: two distinct values logged as one: %q", name, pair[0])
		}
		for _, v := range pair {
			if len(v) > maxField {
				t.Errorf("%s: %d bytes logged, cap is %d", name, len(v), maxField)
			}
			if !strings.Contains(v, " bytes") {
				t.Errorf("%s: cut without a marker: %q", name, v)
			}
		}
	}
}

// Cap never cuts silently: a cut value says so and how long it was.
func TestCapMarksTheCutWithTheLength(t *testing.T) {
	s := strings.Repeat("é", 200) // 400 bytes
	got := Cap(s, maxField)
	if len(got) > maxField || !strings.HasSuffix(got, "…[400 bytes]") {
		t.Fatalf("Cap = %q (%d bytes)", got, len(got))
	}
	if !strings.HasPrefix(s, strings.TrimSuffix(got, "…[400 bytes]")) || !json.Valid([]byte(`"`+strings.TrimSuffix(got, "…[400 bytes]")+`"`)) {
		t.Fatalf("Cap split a character or changed the head: %q", got)
	}
	if Cap("short", maxField) != "short" {
		t.Fatal("a short value changed")
	}
}
