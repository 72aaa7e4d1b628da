package proxy

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestRFC2231ContinuationsInAContentTypeAreRefused: round 35. Parsers put
// RFC 2231 continuations together differently: Go lets "boundary*0=YY"
// override "boundary=XX", Python's email and busboy split at XX; Go sees no
// charset in a part's "charset*1=utf-7", Python sees utf-7. So the shape
// check read a body at a boundary Python never split at (its parts'
// headers, a utf-7 one among them, never checked), and a part was utf-7
// to the origin alone: a guess list went out and came back scrubbed at the
// right line. A '*' outside quotes that is not an extended parameter's
// "*=" is refused, in the request's Content-Type and in part headers.
func TestRFC2231ContinuationsInAContentTypeAreRefused(t *testing.T) {
	utf7 := strings.NewReplacer("+", "+ACs-").Replace(strings.Join(guesses34, "\n"))
	part := func(ct, text string) string {
		return "--XX\r\nContent-Disposition: form-data; name=\"note\"\r\nContent-Type: " + ct + "\r\n\r\n" + text + "\r\n--XX--\r\n"
	}
	for _, h2 := range []bool{false, true} {
		wantRefusedBody(t, h2, "a part's charset*1", "multipart/form-data; boundary=XX", part("text/plain; charset*1=utf-7", utf7))
		wantRefusedHead(t, h2, "a boundary*0 beside the boundary", "multipart/form-data; boundary=XX; boundary*0=YY",
			"--YY\r\nContent-Disposition: form-data; name=\"cover\"\r\n\r\n"+part("text/plain; charset=utf-7", utf7)+"\r\n--YY--\r\n")
		wantRefusedBody(t, h2, "a continued filename", "multipart/form-data; boundary=XX",
			"--XX\r\nContent-Disposition: form-data; name=\"f\"; filename*0=\"a\"; filename*1=\"b\"\r\n\r\nx\r\n--XX--\r\n")
	}
}

// TestMIMEThatPythonReadsByRulesOfItsOwnIsRefused: round 36. Python's
// email gives a multipart/digest's parts the type message/rfc822 (so the
// header block the shape check read as text/plain content held a UTF-7
// part), reads every block of a message/delivery-status as a header block
// (encoded words hid in the second), and drops '-' and '_' from a base64
// part, which the guard's alphabet view read as the URL alphabet (a guess
// list's base64 with a '-' every four characters). Composite types other
// than form-data, mixed, related, alternative, rfc822 and global are
// refused whatever they hold, and a base64 part holds only its alphabet,
// and '=' only at its end (round 37).
func TestMIMEThatPythonReadsByRulesOfItsOwnIsRefused(t *testing.T) {
	list := strings.Join(guesses34, "\n")
	var dashed strings.Builder
	for i, c := range base64.StdEncoding.EncodeToString([]byte(list)) {
		if i > 0 && i%4 == 0 {
			dashed.WriteByte('-')
		}
		dashed.WriteRune(c)
	}
	// Round 37: two bytes at a time, each piece padded: python-multipart
	// decodes each read on its own, so a piece per HTTP chunk came out
	// whole there, while the alphabet view (and Go's and Python's email
	// decoders) read one stream, broken at every piece.
	var padded strings.Builder
	for i := 0; i < len(list); i += 2 {
		padded.WriteString(base64.StdEncoding.EncodeToString([]byte(list[i:min(i+2, len(list))])))
	}
	for _, h2 := range []bool{false, true} {
		wantRefusedBody(t, h2, "a digest part", "multipart/form-data; boundary=XX",
			"--XX\r\nContent-Disposition: form-data; name=\"note\"\r\nContent-Type: multipart/digest; boundary=DD\r\n\r\n"+
				"--DD\r\n\r\nContent-Type: text/plain; charset=utf-7\r\n\r\nhello\r\n--DD--\r\n\r\n--XX--\r\n")
		wantRefusedBody(t, h2, "a delivery-status part", "multipart/form-data; boundary=XX",
			"--XX\r\nContent-Disposition: form-data; name=\"note\"\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; x\r\n\r\nX-Note: hello\r\n\r\n--XX--\r\n")
		wantRefusedBody(t, h2, "base64 with a '-' every four characters", "multipart/form-data; boundary=XX",
			"--XX\r\nContent-Disposition: form-data; name=\"note\"\r\nContent-Transfer-Encoding: base64\r\n\r\n"+dashed.String()+"\r\n--XX--\r\n")
		wantRefusedBody(t, h2, "base64 padded every two bytes", "multipart/form-data; boundary=XX",
			"--XX\r\nContent-Disposition: form-data; name=\"note\"\r\nContent-Transfer-Encoding: base64\r\n\r\n"+padded.String()+"\r\n--XX--\r\n")
	}
}

// TestTransferEncodingsDecodedReadByReadAreRefusedUnlessAsEncodersWriteThem:
// round 38. formidable (Node) decodes each base64 line on its own, so lines
// of two characters gave a byte apiece where the stream decoders (and the
// guard's alphabet view) read garbage; python-multipart runs a2b_qp on
// each read, where '=' CR drops only to the read's end, so "=\rZZ" at the
// end of each HTTP chunk cut nothing from the guesses there while the
// guard's Python view dropped everything after the first. A base64 line
// is whole four-character groups; in a quoted-printable part each '=' is
// =XX or a soft break, and every line ends with CRLF.
func TestTransferEncodingsDecodedReadByReadAreRefusedUnlessAsEncodersWriteThem(t *testing.T) {
	var lines, qp strings.Builder
	for _, g := range guesses34 {
		for i := 0; i < len(g); i++ {
			lines.WriteString(strings.TrimRight(base64.StdEncoding.EncodeToString([]byte{g[i]}), "=") + "\r\n")
		}
		qp.WriteString(g[:4] + "=\rZZ" + g[4:] + "=0D=0A")
	}
	part := func(cte, content string) string {
		return "--XX\r\nContent-Disposition: form-data; name=\"note\"\r\nContent-Transfer-Encoding: " + cte + "\r\n\r\n" + content + "\r\n--XX--\r\n"
	}
	for _, h2 := range []bool{false, true} {
		wantRefusedBody(t, h2, "base64 lines of two characters", "multipart/form-data; boundary=XX", part("base64", lines.String()))
		wantRefusedBody(t, h2, "a quoted-printable '=' CR", "multipart/form-data; boundary=XX", part("quoted-printable", qp.String()))
	}
}

// TestAFormPartCarryingATransferEncodingIsRefused: round 39. formidable
// decodes floor(len/4)*4 raw characters of each read, counting line
// breaks, so base64 lines chunked "abcd\r\nef" / "gh\r\n" gave five bytes
// per eight characters (a guess list) where the stream decoders and the
// guard read garbage; the origin's reads fall where egressd writes, which
// the program's chunks decide. A transfer encoding is allowed only within
// a message/* part, where email parsers decode the stream.
func TestAFormPartCarryingATransferEncodingIsRefused(t *testing.T) {
	var body strings.Builder
	body.WriteString("--XX\r\nContent-Disposition: form-data; name=\"note\"\r\nContent-Transfer-Encoding: base64\r\n\r\n")
	enc := base64.StdEncoding.EncodeToString([]byte("harmless text, in whole groups"))
	for i := 0; i+4 <= len(enc); i += 4 {
		body.WriteString(enc[i:i+4] + "\r\n")
	}
	body.WriteString("--XX--\r\n")
	for _, h2 := range []bool{false, true} {
		wantRefusedBody(t, h2, "a base64 form part", "multipart/form-data; boundary=XX", body.String())
	}
}

// TestAContentTypeThatFormidableReadsAsAnotherMultipartIsRefused: round 40.
// formidable picks its multipart parser by /multipart/i anywhere in the
// field and takes the first /boundary=/i match: a message/rfc822 or
// text/plain body with a boundary parameter, or an "xboundary=" parameter
// before the boundary, made it parse a body the guard read otherwise (a
// base64 form part inside, decoded read by read); and (round 41) it keeps
// blanks before the ';' in the boundary Go trims, so its parts lay in what
// the guard read as the epilogue.
func TestAContentTypeThatFormidableReadsAsAnotherMultipartIsRefused(t *testing.T) {
	body := "Content-Type: multipart/form-data; boundary=multipartXX\r\n\r\n--multipartXX\r\n\r\nhello\r\n--multipartXX--\r\n"
	for _, h2 := range []bool{false, true} {
		for _, ct := range []string{"message/rfc822; boundary=multipartXX", "text/plain; boundary=multipartXX", "multipart/form-data; xboundary=multipartXX; boundary=BB",
			"multipart/form-data; boundary=multipartXX ; a=b"} { // round 41: "multipartXX " to formidable, which keeps the blank
			wantRefusedHead(t, h2, ct, ct, body)
		}
	}
}
