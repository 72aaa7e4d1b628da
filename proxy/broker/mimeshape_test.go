package broker

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// shapeOf is the verdict of the structure check on body, fed in reads cut
// at cuts (ascending offsets).
func shapeOf(mediatype, boundary, body string, cuts ...int) string {
	s := newMIMEShape(mediatype, boundary)
	last := 0
	for _, c := range append(cuts, len(body)) {
		if v := s.feed([]byte(body[last:c])); v != "" {
			return v
		}
		last = c
	}
	return s.end()
}

// shapeBodies are bodies of multipart/form-data; boundary=XB (or
// message/rfc822 where they begin with a field), each with its verdict:
// "" for those honest clients send.
var shapeBodies = []struct {
	name, body string
	ok         bool
}{
	{"curl -F with a binary file", "--XB\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n\x00\r\rbin\r-\r--X\xff\r\n--XB--\r\n", true},
	{"LF line ends", "--XB\nContent-Disposition: form-data; name=\"a\"\n\nx\n--XB--\n", false},
	{"a delimiter after a bare LF in a part's content", "--XB\r\nX-A: 1\r\n\r\nx\n--XB\r\nX-A: 1\r\n\r\ny\r\n--XB--\r\n", false},
	{"an empty part", "--XB\r\nX-A: 1\r\n\r\n--XB--\r\n", true},
	// Round 43: Werkzeug and Rack read a part without headers from its
	// first content lines.
	{"a part with no header fields", "--XB\r\n\r\nContent-Type: text/plain; charset=cp037\r\n\r\nx\r\n--XB--\r\n", false},
	{"a nested part with no header fields", "--XB\r\nContent-Type: multipart/mixed; boundary=in\r\n\r\n--in\r\n\r\nx\r\n--in--\r\n--XB--\r\n", false},
	{"preamble, epilogue", "pre\r\n--XB\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nx\r\n--XB--\r\nepi\r\n", true},
	{"transport padding (busboy: no delimiter)", "pre\r\n--XB \t\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nx\r\n--XB--\r\n", false},
	{"close delimiter at the end, no line end", "--XB\r\nX-A: 1\r\n\r\nx\r\n--XB--", true},
	{"nested multipart/mixed", "--XB\r\nContent-Type: multipart/mixed; boundary=\"in\"\r\n\r\n--in\r\nX-A: 1\r\n\r\na=3D\r\n--in--\r\n--XB--\r\n", true},
	// Round 39: a transfer encoding outside any message/* part is
	// refused (form parsers decode it read by read); inside one, email
	// parsers decode the stream, as the views read it.
	{"quoted-printable part outside a message", "--XB\r\nContent-Type: multipart/mixed; boundary=\"in\"\r\n\r\n--in\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\na=3D\r\n--in--\r\n--XB--\r\n", false},
	{"base64 form part", "--XB\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Transfer-Encoding: base64\r\n\r\nYWJj\r\n--XB--\r\n", false},
	{"quoted-printable part inside a message/rfc822 part", "--XB\r\nContent-Type: message/rfc822\r\n\r\nSubject: x\r\nContent-Type: multipart/mixed; boundary=\"in\"\r\n\r\n--in\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\na=3D\r\n--in--\r\n--XB--\r\n", true},
	{"a message/rfc822 part", "--XB\r\nContent-Type: message/rfc822\r\n\r\nSubject: x\r\n\r\nbody\r\n--XB--\r\n", true},
	{"RFC 2231 filename in utf-8", "--XB\r\nContent-Disposition: form-data; name=\"f\"; filename*=utf-8''caf%C3%A9\r\n\r\nx\r\n--XB--\r\n", true},
	{"lone CR ending a part header", "--XB\r\nContent-Disposition: form-data; name=\"a\"\rX-Pad: =\r\r\nx\r\n--XB--\r\n", false},
	{"lone CR in the preamble", "pre\rx\r\n--XB\r\nX-A: 1\r\n\r\nx\r\n--XB--\r\n", false},
	{"delimiter after a lone CR", "--XB\r\nX-A: 1\r\n\r\nx\r--XB\r\nX-A: 1\r\n\r\ny\r\n--XB--\r\n", false},
	{"delimiter line with more after it", "--XB\r\nX-A: 1\r\n\r\nx\r\n--XBy\r\n--XB--\r\n", false},
	{"encoded word in a part header", "--XB\r\nContent-Type: =?utf-8?q?text/plain?=\r\n\r\nx\r\n--XB--\r\n", false},
	{"utf-7 part", "--XB\r\nContent-Type: text/plain; charset=utf-7\r\n\r\nx\r\n--XB--\r\n", false},
	{"RFC 2231 filename in utf-7", "--XB\r\nContent-Disposition: form-data; name=\"f\"; filename*=utf-7''+AGE-\r\n\r\nx\r\n--XB--\r\n", false},
	{"a _charset_ field (RFC 7578 4.6)", "--XB\r\nContent-Disposition: form-data; name=\"_charset_\"\r\n\r\nutf-7\r\n--XB--\r\n", false},
	{"a Content-Disposition that does not parse", "--XB\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--XB--\r\n", false},
	{"a folded boundary (Go joins with one space, Python keeps the blanks)", "--XB\r\nContent-Type: multipart/mixed; boundary=\"a\r\n  b\"\r\n\r\n--a  b--\r\n--XB--\r\n", false},
	{"two transfer encodings", "--XB\r\nContent-Transfer-Encoding: base64\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nx\r\n--XB--\r\n", false},
	{"base64 multipart part", "--XB\r\nContent-Type: multipart/mixed; boundary=in\r\nContent-Transfer-Encoding: base64\r\n\r\n--in--\r\n--XB--\r\n", false},
	{"nested boundary beginning with the outer", "--XB\r\nContent-Type: multipart/mixed; boundary=XBX\r\n\r\n--XBX--\r\n--XB--\r\n", false},
	{"a header line that is no field", "--XB\r\nnot a field\r\n\r\nx\r\n--XB--\r\n", false},
	{"a header byte not ASCII", "--XB\r\nX-A: \xc3\xa9\r\n\r\nx\r\n--XB--\r\n", false},
	{"no close delimiter", "--XB\r\nX-A: 1\r\n\r\nx\r\n", false},
	{"inner multipart left open", "--XB\r\nContent-Type: multipart/mixed; boundary=in\r\n\r\n--in\r\nX-A: 1\r\n\r\na\r\n--XB--\r\n", false},
	// Round 42: Java's commons-fileupload and Werkzeug begin a part at a
	// delimiter inside a line; the others read on.
	{"a delimiter after junk in the preamble", "junk--XB\r\nContent-Type: text/plain; charset=IBM037\r\n\r\nx\r\n--XB--\r\n", false},
	{"a delimiter after dashes at a line's start", "---XB\r\nX-A: 1\r\n\r\nx\r\n--XB\r\nX-A: 1\r\n\r\ny\r\n--XB--\r\n", false},
	{"a delimiter inside a part's content", "--XB\r\nX-A: 1\r\n\r\nab--XBcd\r\n--XB--\r\n", false},
	{"an outer delimiter inside a nested part's content", "--XB\r\nContent-Type: multipart/mixed; boundary=in\r\n\r\n--in\r\nX-A: 1\r\n\r\na--XB\r\n--in--\r\n--XB--\r\n", false},
	{"a delimiter inside a part header", "--XB\r\nContent-Disposition: form-data; name=\"a--XB\"\r\n\r\nx\r\n--XB--\r\n", false},
	{"a delimiter inside the epilogue's line", "--XB\r\nX-A: 1\r\n\r\nx\r\n--XB--\r\nepi--XB\r\n", true},
	{"dashes and a part of the boundary inside a line", "--XB\r\nX-A: 1\r\n\r\na--X-B --XC\r\n--XB--\r\n", true},
	{"oversized header block", "--XB\r\n" + strings.Repeat("X-A: "+strings.Repeat("a", 1000)+"\r\n", 17) + "\r\nx\r\n--XB--\r\n", false},
}

// TestTheMIMEShapeCheckFollowsTheCanonicalRulesWhateverTheReads: each body
// has its verdict, whole, cut into two reads at every byte, and byte by
// byte: the verdict is a function of the bytes, never of the reads.
func TestTheMIMEShapeCheckFollowsTheCanonicalRulesWhateverTheReads(t *testing.T) {
	for _, tc := range shapeBodies {
		whole := shapeOf("multipart/form-data", "XB", tc.body)
		if (whole == "") != tc.ok {
			t.Fatalf("%s: verdict %q, want ok=%v", tc.name, whole, tc.ok)
		}
		var every []int
		for cut := 0; cut <= len(tc.body); cut++ {
			if got := shapeOf("multipart/form-data", "XB", tc.body, cut); got != whole {
				t.Fatalf("%s cut at %d: %q, whole %q", tc.name, cut, got, whole)
			}
			every = append(every, cut)
		}
		if got := shapeOf("multipart/form-data", "XB", tc.body, every...); got != whole {
			t.Fatalf("%s byte by byte: %q, whole %q", tc.name, got, whole)
		}
	}
}

// TestATopLevelMessageIsCheckedFromItsHeaderBlock: a message/* body begins
// with a header block, checked as a part's.
func TestATopLevelMessageIsCheckedFromItsHeaderBlock(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{"Subject: x\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nwint=\r\ner", true},
		{"Subject: x\rContent-Transfer-Encoding: quoted-printable\r\r\nwint=\r\ner", false},
		{"Subject: =?utf-8?b?eA==?=\r\n\r\nx", false},
		{"Subject: x\r\n", false}, // ends inside its header block
	} {
		if got := shapeOf("message/rfc822", "", tc.body); (got == "") != tc.ok {
			t.Fatalf("%q: %q, want ok=%v", tc.body, got, tc.ok)
		}
	}
}

// TestTheMIMEShapeCheckHoldsABoundedAmount: a header block, a line that
// begins like a delimiter and what follows a delimiter are held only up
// to their bounds, however long the body makes them.
func TestTheMIMEShapeCheckHoldsABoundedAmount(t *testing.T) {
	s := newMIMEShape("multipart/form-data", "XB")
	s.feed([]byte("--XB\r\nX-A: " + strings.Repeat("a", 1<<20)))
	if s.bad == "" || cap(s.block) > 2*maxHeaderBlock {
		t.Fatalf("a 1 MiB header line: verdict %q, %d bytes held", s.bad, cap(s.block))
	}
	s = newMIMEShape("multipart/form-data", "XB")
	s.feed([]byte("--XB" + strings.Repeat(" ", 1<<20)))
	if s.bad == "" || cap(s.rest) > 64 {
		t.Fatalf("1 MiB of padding: verdict %q, %d bytes held", s.bad, cap(s.rest))
	}
	s = newMIMEShape("multipart/form-data", "XB")
	s.feed([]byte("--XB\r\nX-A: 1\r\n\r\n" + strings.Repeat("--X\n", 1<<18)))
	if s.bad != "" || cap(s.prefix) > 64 {
		t.Fatalf("lines like a delimiter: verdict %q, %d bytes held", s.bad, cap(s.prefix))
	}
}

// TestCanonicalContentTypes: what honest clients send passes; round 34's
// encoded words, other charsets, and what parameter splitters read
// differently are refused.
func TestCanonicalContentTypes(t *testing.T) {
	for _, ct := range []string{
		"multipart/form-data; boundary=------------------------d74496d66958873e",
		"multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxkTrZu0gW",
		"multipart/related; boundary=foo_bar_baz; type=\"application/json\"",
		"application/json; charset=UTF-8",
		"message/rfc822",
		"text/plain; charset=iso-8859-1",
	} {
		if _, _, ok := canonicalType(ct); !ok {
			t.Errorf("%q refused", ct)
		}
	}
	for _, ct := range []string{
		"=?utf-8?q?multipart=2Fform-data?=; boundary=x",
		"multipart=?utf-8?q?=2F?=form-data; boundary=x",
		"text/plain; charset=utf-7",
		"text/plain; charset=utf-16le",
		"text/plain; charset*=utf-7''x",
		"multipart/form-data",
		"multipart/form-data; boundary=\"XB \"",
		"multipart/form-data; boundary=XB; x=\"a\\\";boundary=YY\"",
		"multipart/form-data; boundary=XB; x=\"a;b\"",
		"\u00a0multipart/form-data; boundary=x",
		"multipart/form-data; boundary=x; boundary=y",
		"multipart/form-data; boundary=XX; boundary*0=YY", // round 35: YY to Go, XX to Python and busboy
		"text/plain; charset*1=utf-7",                     // round 35: no charset to Go, utf-7 to Python
		"text/plain; charset*0*=utf-7''x",
		"message/rfc822; boundary=multipartXX",                    // round 40: formidable parses it as multipart
		"text/plain; boundary=XX",                                 // round 40
		"multipart/form-data; xboundary=multipartXX; boundary=BB", // round 40: formidable's first boundary= is XX
		"multipart/form-data; x=\"boundary=ZZ\"; boundary=BB",
		"multipart/form-data; boundary=XX ; a=b", // round 41: "XX " to formidable
		"multipart/form-data; boundary=XX\t",
		"multipart/form-data; boundary =XX",
		"form-data",
	} {
		if _, _, ok := canonicalType(ct); ok {
			t.Errorf("%q accepted", ct)
		}
	}
}

// FuzzMIMEShape: no input panics the check, and its verdict does not
// depend on where the reads are cut.
func FuzzMIMEShape(f *testing.F) {
	for _, tc := range shapeBodies {
		f.Add(tc.body, 7)
	}
	f.Fuzz(func(t *testing.T, body string, cut int) {
		if cut < 0 || cut > len(body) {
			cut = len(body) / 2
		}
		if whole, split := shapeOf("multipart/form-data", "XB", body), shapeOf("multipart/form-data", "XB", body, cut); whole != split {
			t.Fatalf("%q cut at %d: %q, whole %q", body, cut, split, whole)
		}
	})
}

// TestWhatTheShapeCheckAcceptsGoAndPythonSplitIntoTheSameParts: the point
// of the rules is that what is left, every parser reads alike. Random
// multipart bodies (line ends CRLF, LF or a lone CR, headers that end in
// '=', delimiter-like lines, padding) that the check accepts split into
// the same parts, with the same content bytes and transfer encoding, in
// Go's mime/multipart (a Go origin's form parser) and Python's email
// package (policy.default).
func TestWhatTheShapeCheckAcceptsGoAndPythonSplitIntoTheSameParts(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pick := func(s ...string) string { return s[r.IntN(len(s))] }
	eol := func() string { return pick("\r\n", "\r\n", "\r\n", "\r\n", "\r\n", "\r\n", "\n", "\r") }
	var multipartBody func(b *strings.Builder, boundary string, depth int)
	multipartBody = func(b *strings.Builder, boundary string, depth int) {
		b.WriteString(pick("", "pre\r\n", "pre\n", "pre\rx\r\n"))
		for range 1 + r.IntN(3) {
			b.WriteString("--" + boundary + pick("", " ", "\t ", "x") + eol())
			if depth < 2 && r.IntN(4) == 0 {
				b.WriteString("Content-Type: multipart/mixed; boundary=in" + strconv.Itoa(depth) + eol() + eol())
				multipartBody(b, "in"+strconv.Itoa(depth), depth+1)
				b.WriteString(eol())
				continue
			}
			for range r.IntN(3) {
				b.WriteString(pick("Content-Transfer-Encoding: quoted-printable", "Content-Transfer-Encoding: base64",
					"X-Pad: =", "Content-Disposition: form-data; name=\"a\"", " folded", "Content-Type: text/plain; charset=utf-8") + eol())
			}
			b.WriteString(eol())
			for range r.IntN(6) {
				b.WriteString(pick("a", "=", "=\r", "\r", "\n", "\r\n", "--X", "--XB", "--in0", "\r\n--in1", "-", " ", "=41", "\x00"))
			}
			b.WriteString(eol())
		}
		b.WriteString("--" + boundary + "--" + pick("", "\r\n", "\n", "\r", " \r\n", "\r\nepi"))
	}
	var accepted []string
	for len(accepted) < 1000 {
		var b strings.Builder
		multipartBody(&b, "XB", 0)
		if shapeOf("multipart/form-data", "XB", b.String()) == "" {
			accepted = append(accepted, b.String())
		}
	}
	var goParts bytes.Buffer // per body: each leaf part's CTE and content, NUL-separated; bodies by \x01
	var goLeaves func(body io.Reader, boundary string)
	goLeaves = func(body io.Reader, boundary string) {
		mr := multipart.NewReader(body, boundary)
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return
			}
			if mt, params, err := mime.ParseMediaType(p.Header.Get("Content-Type")); err == nil && strings.HasPrefix(mt, "multipart/") {
				goLeaves(p, params["boundary"])
				continue
			}
			content, _ := io.ReadAll(p)
			fmt.Fprintf(&goParts, "%s\x00%s\x00", strings.TrimSpace(p.Header.Get("Content-Transfer-Encoding")), content)
		}
	}
	nested := 0
	for _, body := range accepted {
		if strings.Contains(body, "boundary=in") {
			nested++
		}
		goLeaves(strings.NewReader(body), "XB")
		goParts.WriteByte(1)
	}
	t.Logf("%d accepted bodies, %d with a nested multipart", len(accepted), nested)
	python := python3(t)
	var in bytes.Buffer
	for _, body := range accepted {
		in.WriteString(body)
		in.WriteByte(1)
	}
	cmd := exec.Command(python, "-c", `import email, email.policy, sys
out = sys.stdout.buffer
for body in sys.stdin.buffer.read().split(b"\x01")[:-1]:
    m = email.message_from_bytes(b"Content-Type: multipart/form-data; boundary=XB\r\n\r\n" + body, policy=email.policy.default)
    def leaves(m):
        for p in m.get_payload():
            if p.is_multipart():
                leaves(p)
                continue
            cte = (p.get("Content-Transfer-Encoding") or "").strip()
            out.write(cte.encode() + b"\0" + p.get_payload(decode=False).encode("ascii", "surrogateescape") + b"\0")
    leaves(m)
    out.write(b"\x01")`)
	cmd.Stdin, cmd.Stderr = &in, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	gos, pys := bytes.Split(goParts.Bytes(), []byte{1}), bytes.Split(out, []byte{1})
	for i, body := range accepted {
		if !bytes.Equal(gos[i], pys[i]) {
			t.Fatalf("%q: Go read %q, Python %q", body, gos[i], pys[i])
		}
	}
}
