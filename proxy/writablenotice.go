package proxy

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"time"
)

// writableNotices decides which writable-manifest warnings a start or
// reload writes: one line per manifest for each distinct set of writers
// (the first writer and how many more), repeated only when the set
// changes. Each manifest has a budget of noticeBurst lines, refilled one
// per noticeEvery, so an integration that flips its set on every reload
// writes a bounded number; the changes held back are counted in the next
// line written. (A manifest ~1,900 folders deep rewritten every 0.3 s
// wrote a line per folder per reload: 40,000 audit lines and 90 MB of
// stderr in 20 s, until the audit disk was full and every integration got
// 503 audit_unavailable.)
type writableNotices struct {
	now func() time.Time
	by  map[string]*writableNotice // by integration key
}

type writableNotice struct {
	digest string    // of the writers last written (or seen empty)
	tokens float64   // lines this manifest may still write now
	filled time.Time // when tokens was last refilled
	held   int       // changes not written since the last line
}

const (
	noticeBurst = 4
	noticeEvery = time.Minute
)

// notice returns the line to write for the manifest of integration key,
// whose writers are ws (manifestWriters), or false for none.
func (n *writableNotices) notice(key, id string, ws []string) (string, bool) {
	if n.by == nil {
		n.by = map[string]*writableNotice{}
	}
	now := time.Now()
	if n.now != nil {
		now = n.now()
	}
	sum := sha256.Sum256([]byte(strings.Join(ws, "\x00")))
	digest := string(sum[:])
	s := n.by[key]
	if s == nil {
		s = &writableNotice{tokens: noticeBurst, filled: now}
		n.by[key] = s
	}
	s.tokens = min(noticeBurst, s.tokens+float64(now.Sub(s.filled))/float64(noticeEvery))
	s.filled = now
	if digest == s.digest {
		return "", false
	}
	if len(ws) == 0 { // no one else can write it now: nothing to warn of
		s.digest = digest
		return "", false
	}
	if s.tokens < 1 {
		s.held++
		return "", false
	}
	s.tokens--
	s.digest = digest
	msg := fmt.Sprintf("%s: whoever can write it can change %s's allowlist at the next reload", ws[0], id)
	if len(ws) > 1 {
		msg = fmt.Sprintf("%s, and %d more files or folders on its path can be changed by others: whoever can write them can change %s's allowlist at the next reload", ws[0], len(ws)-1, id)
	}
	if s.held > 0 {
		msg += fmt.Sprintf(" (%d earlier changes to who can write it were not written)", s.held)
		s.held = 0
	}
	return msg, true
}

// keep forgets every integration not in keys (removed from the config).
func (n *writableNotices) keep(keys map[string]bool) {
	for k := range n.by {
		if !keys[k] {
			delete(n.by, k)
		}
	}
}
