package broker

import (
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// TestTheFoldReadsNFKDFromTheTablesAsAppendGivesIt: the ASCII bytes of
// each character's decomposition from norm's tables are those of its NFKD
// form, for every character but the ASCII ones (given as they are).
func TestTheFoldReadsNFKDFromTheTablesAsAppendGivesIt(t *testing.T) {
	for r := rune(0x80); r <= 0x10FFFF; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		char := utf8.AppendRune(nil, r)
		var want, got []byte
		for _, c := range norm.NFKD.Append(nil, char...) {
			if c < utf8.RuneSelf {
				want = append(want, c)
			}
		}
		for _, c := range norm.NFKD.Properties(char).Decomposition() {
			if c < utf8.RuneSelf {
				got = append(got, c)
			}
		}
		if string(got) != string(want) {
			t.Fatalf("U+%04X: tables %q, NFKD %q", r, got, want)
		}
	}
}
