package proxy

import (
	"strings"
	"testing"
	"time"
)

// An integration that flips who can write its manifest on every reload
// (two link targets, owned differently) gets noticeBurst lines, then one
// per noticeEvery, and the line after a pause counts the changes held back
// (each reload that found writers other than those last written: 498).
// The same writers again write nothing; writers gone write nothing.
func TestAWritableManifestFlippingItsWritersEveryReloadWritesABoundedNumberOfLines(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	n := writableNotices{now: func() time.Time { return now }}
	a, b := []string{"/m/a can be changed by its owner, uid 4242", "/m"}, []string{"/m/b can be changed by every user"}
	written := 0
	for i := range 1000 {
		ws := a
		if i%2 == 1 {
			ws = b
		}
		if _, ok := n.notice("k", "com.test.hostile", ws); ok {
			written++
		}
	}
	if written != noticeBurst {
		t.Fatalf("1000 flips wrote %d lines, want %d", written, noticeBurst)
	}
	if _, ok := n.notice("k", "com.test.hostile", b); ok {
		t.Fatal("the writers last written, again, wrote a line")
	}
	now = now.Add(noticeEvery)
	msg, ok := n.notice("k", "com.test.hostile", a)
	if !ok || !strings.Contains(msg, "/m/a can be changed by its owner, uid 4242, and 1 more files or folders on its path") ||
		!strings.Contains(msg, "(498 earlier changes to who can write it were not written)") {
		t.Fatalf("after %v: %v %q", noticeEvery, ok, msg)
	}
	if _, ok := n.notice("k", "com.test.hostile", nil); ok {
		t.Fatal("no writers wrote a line")
	}
}
