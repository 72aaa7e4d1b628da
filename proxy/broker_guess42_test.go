package proxy

import (
	"strings"
	"testing"
)

// cp037 encodes s in EBCDIC (IBM037) for the characters guesses hold.
func cp037(t *testing.T, s string) string {
	t.Helper()
	var b strings.Builder
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'i':
			b.WriteByte(byte(0x81 + c - 'a'))
		case c >= 'j' && c <= 'r':
			b.WriteByte(byte(0x91 + c - 'j'))
		case c >= 's' && c <= 'z':
			b.WriteByte(byte(0xa2 + c - 's'))
		case c >= '0' && c <= '9':
			b.WriteByte(byte(0xf0 + c - '0'))
		case c == '+':
			b.WriteByte(0x4e)
		case c == ' ':
			b.WriteByte(0x40)
		default:
			t.Fatalf("cp037: %q", c)
		}
	}
	return b.String()
}

// TestAPartBegunByADelimiterInsideALineIsRefused: round 42. Java's
// commons-fileupload finds the first delimiter anywhere in the preamble,
// and Werkzeug's preamble needs no line break before it, so "junk--XB"
// begins a part to them, while Go, Python and the shape check read the
// line as preamble and never checked that part's header: its
// `charset=IBM037` carried an EBCDIC guess list, which both origins
// decoded and showed back, the right guess scrubbed to the placeholder. A
// delimiter in force anywhere but at a line's start, in content or in a
// part header, is refused 400.
func TestAPartBegunByADelimiterInsideALineIsRefused(t *testing.T) {
	guesses := cp037(t, strings.Join(guesses34, " "))
	part := "Content-Disposition: form-data; name=\"guesses\"\r\nContent-Type: text/plain; charset=IBM037\r\n\r\n" + guesses + "\r\n"
	tail := "--XB\r\nContent-Disposition: form-data; name=\"token\"\r\n\r\nhello\r\n--XB--\r\n"
	for _, c := range []struct{ what, body string }{
		{"a delimiter after junk in the preamble", "junk--XB\r\n" + part + tail},
		{"a delimiter after dashes at a line's start", "---XB\r\n" + part + tail},
		{"a delimiter inside a part's content", "--XB\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx--XB\r\n" + part + tail},
		{"a delimiter inside a part header", "--XB\r\nContent-Disposition: form-data; name=\"a--XB\"\r\n\r\nx\r\n" + tail},
	} {
		for _, h2 := range []bool{false, true} {
			wantRefusedBody(t, h2, c.what, "multipart/form-data; boundary=XB", c.body)
		}
	}
}

// TestAPartWithAnEmptyHeaderBlockIsRefused: round 43. A part begun by
// "--XB" CRLF CRLF has no header fields to Go, Python, Java and the shape
// check, which read what follows as content; Werkzeug and Rack look for
// the blank line ending a part's headers from the delimiter line's own
// CRLF on, so they read the content's first lines as the part's headers:
// `charset=cp037` there made Werkzeug decode an EBCDIC guess list and show
// it back. A part's header block is never empty: refused 400.
func TestAPartWithAnEmptyHeaderBlockIsRefused(t *testing.T) {
	hidden := "Content-Disposition: form-data; name=\"guesses\"\r\nContent-Type: text/plain; charset=cp037\r\n\r\n" + cp037(t, strings.Join(guesses34, " ")) + "\r\n"
	for _, c := range []struct{ what, body string }{
		{"an empty header block", "--XB\r\n\r\n" + hidden + "--XB--\r\n"},
		{"an empty header block in a nested multipart", "--XB\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Type: multipart/mixed; boundary=in\r\n\r\n--in\r\n\r\n" + hidden + "--in--\r\n--XB--\r\n"},
	} {
		for _, h2 := range []bool{false, true} {
			wantRefusedBody(t, h2, c.what, "multipart/form-data; boundary=XB", c.body)
		}
	}
}
