package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// maxWriteAllocs bounds what writing one line costs the heap, beyond
// encoding it: the chain's hash kept as the new head. Every connection
// writes two lines.
const maxWriteAllocs = 1

// connectEvent is the line every allowed connection writes.
func connectEvent() Event {
	return Event{Kind: Connect, Integration: "com.example.weather", IntegrationVersion: "1.2.0", Generation: 3,
		Decision: "allow", Reason: "allowlisted", Host: "api.weather.example", HostRaw: "api.weather.example:443",
		Port: 443, Rule: "api.weather.example", Addr: "203.0.113.7:443", Conn: "c-1a2b3c4d-1", Method: "CONNECT",
		Time: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)}
}

// Sealing a line reuses the log's buffers and hasher: a connection's two
// lines must not each allocate a fresh line, hasher, digest and hex string.
func TestWritingALineReusesTheLogsBuffers(t *testing.T) {
	for _, key := range [][]byte{nil, []byte("operator key, 32 bytes long....")} {
		l, err := New(io.Discard, Options{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		ev := connectEvent()
		allocs := testing.AllocsPerRun(500, func() {
			if err := l.Write(ev); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > maxWriteAllocs {
			t.Errorf("keyed=%v: %.0f allocations per line, want at most %d", key != nil, allocs, maxWriteAllocs)
		}
	}
}

// Lines sealed with reused buffers still verify as a chain, keyed or not.
func TestLinesSealedWithReusedBuffersVerify(t *testing.T) {
	for _, key := range [][]byte{nil, []byte("operator key, 32 bytes long....")} {
		path := filepath.Join(t.TempDir(), "audit.log")
		f, err := OpenFile(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		l, err := New(f, Options{Key: key, KeyID: "k1"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			ev := connectEvent()
			ev.BytesUp = int64(i)
			if i%2 == 1 {
				ev.Kind = Close
			}
			l.Write(ev)
		}
		l.Close()
		f.Close()
		v, err := Verify([]string{path}, VerifyOptions{Key: key})
		if err != nil || !v.Intact {
			t.Fatalf("keyed=%v: %+v %v", key != nil, v, err)
		}
	}
}

// host_raw is attacker-chosen; quoting it without fmt must still write
// exactly what %q writes: control bytes, invalid UTF-8, quotes and
// backslashes visible, never interpreted.
func TestHostRawIsQuotedExactlyAsPercentQ(t *testing.T) {
	for _, raw := range []string{"api.example:443", "a\x00b\r\nHost: evil", "\xff\xfe:443", `"\`, "пример.рф:443", "\u202e:443", strings.Repeat("x", 2*maxHostRaw)} {
		q := fmt.Sprintf("%q", CapTarget(raw))
		want := q[1 : len(q)-1]
		if got := quoteRaw(raw); got != want {
			t.Errorf("quoteRaw(%q) = %s, want %s", raw, got, want)
		}
		var buf bytes.Buffer
		l, _ := New(&buf, Options{})
		buf.Reset()
		ev := connectEvent()
		ev.HostRaw = raw
		l.Write(ev)
		var line struct {
			HostRaw string `json:"host_raw"`
			Time    string `json:"time"`
		}
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line.HostRaw != want || line.Time != "2026-12-01T02:00:00Z" {
			t.Errorf("line for %q: %+v %v\n%s", raw, line, err, buf.Bytes())
		}
	}
}

// TestCapTargetKeepsBothEndsAndTheLength: the unit behind
// TestOverLongTargetKeepsTheDomainItEndsWithInTheAuditLog. The cut never
// splits a UTF-8 sequence, says how long the target was, and a capped
// target is left as it is.
func TestCapTargetKeepsBothEndsAndTheLength(t *testing.T) {
	name := strings.Repeat("é", 200) + ".metadata.google.internal"
	got := CapTarget(name)
	if len(got) > maxHostRaw || !utf8.ValidString(got) || !strings.HasSuffix(got, ".metadata.google.internal") ||
		!strings.HasPrefix(got, "éé") || !strings.Contains(got, "…["+strconv.Itoa(len(name))+" bytes]…") {
		t.Fatalf("CapTarget = %q (%d bytes)", got, len(got))
	}
	if CapTarget(got) != got {
		t.Fatalf("capping twice changed %q", got)
	}
	if short := strings.Repeat("a", maxHostRaw); CapTarget(short) != short {
		t.Fatal("a target that fits was cut")
	}
}
