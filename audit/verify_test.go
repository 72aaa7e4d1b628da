package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerifyRefusesALineLongerThanEgressdWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	f, err := OpenFile(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := New(f, Options{})
	l.Close()
	f.Close()
	data, _ := os.ReadFile(path)
	os.WriteFile(path, append(data, strings.Repeat("x", 3<<20)+"\n"...), 0o600)
	v, err := Verify([]string{path}, VerifyOptions{})
	if err != nil || v.Intact || !strings.Contains(v.Problem, "a line longer than 1048576 bytes") {
		t.Fatalf("%+v %v", v, err)
	}
}

func TestCheckpointsAreFoundAmongLongJournalLines(t *testing.T) {
	journal := strings.Repeat("y", 2<<20) + "\n" +
		`{"event":"checkpoint","chain":"abc","seq":7,"hash":"` + strings.Repeat("0", 64) + `"}` + "\n" +
		`{"event":"checkpoint","chain":"abc","seq":9,"hash":"` + strings.Repeat("1", 64) + `"}`
	got, err := ReadCheckpoints(strings.NewReader(journal))
	if err != nil || len(got) != 2 || got[0].Seq != 7 || got[1].Seq != 9 || got[1].Chain != "abc" {
		t.Fatalf("%+v %v", got, err)
	}
}
