package audit

import (
	"strings"
	"testing"
	"time"
)

// The attacker's r7: the four verbatim lines, the sixteen name groups and
// the eight sample slots are filled with documentation addresses spelt
// with a trailing dot (which the raw-string fold took for names), then the
// metadata address is asked for in three other spellings the proxy refuses
// as ip_literal. Every one of them must keep a line of its own.
func TestMetadataAddressInOtherSpellingsIsNotHiddenBehindAFlood(t *testing.T) {
	f := newFoldLog(t)
	var targets []string
	for i := 1; i <= 4; i++ {
		targets = append(targets, "192.0.2."+itoa(int64(i))+":443")
	}
	for i := 10; i < 26; i++ {
		targets = append(targets, "198.51.100."+itoa(int64(i))+".:443")
	}
	for i := 30; i < 38; i++ {
		targets = append(targets, "203.0.113."+itoa(int64(i))+".:443")
	}
	spellings := []string{"169.254.169.254.:443", "2852039166:443", "[::a9fe:a9fe]:443", "0251.0376.0251.0376:443", "0xa9fea9fe:443", "169.254.43518:443", "[::ffff:169.254.169.254]:443", "[64:ff9b::a9fe:a9fe]:443"}
	targets = append(targets, spellings...)
	for _, target := range targets {
		f.s.Write(ipLiteral(target))
		f.clock = f.clock.Add(time.Millisecond)
	}
	lines := f.lines(t)
	for _, want := range spellings {
		found := false
		for _, l := range lines {
			if l["host_raw"] == want && l["suppressed"] == nil {
				found = true
			}
		}
		if !found {
			t.Errorf("%s (the metadata address) has no line of its own:\n%s", want, f.buf.String())
		}
	}
	if got := accounted(lines); got != int64(len(targets)) {
		t.Errorf("lines account for %d events, want %d", got, len(targets))
	}
}

// Past the metadata budget, further spellings of a metadata address are
// folded under the address itself, never into the unlisted remainder.
func TestManySpellingsOfTheMetadataAddressFoldUnderItsName(t *testing.T) {
	f := newFoldLog(t)
	for i := 0; i < 40; i++ {
		f.s.Write(ipLiteral("0" + strings.Repeat("0", i) + "251.254.169.254:443"))
	}
	f.s.Flush(true)
	if strings.Contains(f.buf.String(), `"unlisted"`) {
		t.Errorf("spellings of the metadata address fell into the unlisted remainder:\n%s", f.buf.String())
	}
	if !strings.Contains(f.buf.String(), `"target":"169.254.169.254 (other targets)"`) {
		t.Errorf("no summary names the metadata address:\n%s", f.buf.String())
	}
}

func TestLiteralAddrReadsEverySpellingAResolverReads(t *testing.T) {
	for in, want := range map[string]string{
		"169.254.169.254.:443": "169.254.169.254", "2852039166:443": "169.254.169.254", "[::a9fe:a9fe]:443": "169.254.169.254",
		"0251.0376.0251.0376": "169.254.169.254", "0xa9.0xfe.0xa9.0xfe": "169.254.169.254", "169.254.43518": "169.254.169.254",
		"169.16689662": "169.254.169.254", "[fd00:ec2::254]:80": "fd00:ec2::254", "[::ffff:a9fe:a9fe]": "169.254.169.254",
		"[64:ff9b::a9fe:a9fe]:443": "169.254.169.254", "127.1": "127.0.0.1", "[fe80::1%eth0]:443": "fe80::1",
	} {
		a, ok := LiteralAddr(in, nil)
		if !ok || a.String() != want {
			t.Errorf("LiteralAddr(%q) = %v, %v; want %s", in, a, ok, want)
		}
	}
	for _, in := range []string{"api.example.com:443", "256.1.1.1", "1.2.3.4.5", "08.1.1.1", "0x", "", "1..2", "4294967296"} {
		if a, ok := LiteralAddr(in, nil); ok {
			t.Errorf("LiteralAddr(%q) = %v, want no address", in, a)
		}
	}
}
