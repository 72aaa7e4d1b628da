package broker

import (
	"mime"
	"net/http"
	"regexp"
	"strings"
)

// Canonical MIME. The guard reads a body the way each real decoder reads
// it (views.go, mimeviews.go), but decoders differ wherever the standards
// leave room (a line ended by a lone CR, a Content-Type written as an
// RFC 2047 encoded word, a part in UTF-7), and each difference hid a
// guess list (round 34). Emulating every decoder is an arms race; instead
// a brokered request must be in the form honest clients send (curl -F,
// Python requests, browsers, Go's mime/multipart Writer, Google's
// multipart/related uploads; RFC 7578 and RFC 2046), where the views
// read what every parser reads. Anything else is refused 400 bad_request
// with a sentence saying what to send: a rule about the request's own
// bytes, never about a secret, so it is no guess and no quarantine.
//
// The rules, for the request's Content-Type (this file) and for the
// header blocks of a multipart/* or message/* body (mimeshape.go):
//   - a Content-Type field is printable ASCII, there is at most one, and
//     it parses as type/subtype with parameters (mime.ParseMediaType),
//     with no encoded word ("=?") and no RFC 2231 parameter ("*=");
//   - a charset parameter is utf-8, us-ascii or iso-8859-1, whose ASCII
//     bytes read as themselves (UTF-7, UTF-16 and EBCDIC do not);
//   - a multipart/* type has a boundary of 1 to 70 characters, and a
//     composite type is one of knownComposite;
//   - a Content-Transfer-Encoding is 7bit, 8bit, binary, base64,
//     quoted-printable or a uuencode label (the encodings the views read).

// maxBoundary is RFC 2046's longest boundary.
const maxBoundary = 70

// Sentences of the bad_request refusals of a non-canonical MIME request.
const (
	contentTypeSentence = "egressd: the Content-Type is not one printable-ASCII type/subtype with parameters (no encoded word, no RFC 2231 parameter, a boundary for multipart, a charset of utf-8, us-ascii or iso-8859-1); egressd forwards only MIME it reads as every parser does: send a plain Content-Type such as multipart/form-data; boundary=X"
	cookieSentence      = "egressd: a Cookie header holds a backslash, which no RFC 6265 cookie value holds; cookie parsers (Python's http.cookies, Werkzeug) read \\ooo escapes in a quoted value: send cookie values as the server set them"
	transferSentence    = "egressd: the Content-Transfer-Encoding is not 7bit, 8bit, binary, base64, quoted-printable or x-uuencode; send the body unencoded (RFC 7578) or in one of those"
)

// canonicalHead is the sentence a bad_request refusal of a request whose
// MIME labels break the rules gives, or "".
func canonicalHead(h http.Header) string {
	cts := h.Values("Content-Type")
	if len(cts) > 1 {
		return contentTypeSentence
	}
	for _, v := range cts {
		if _, _, ok := canonicalType(v); !ok {
			return contentTypeSentence
		}
	}
	for _, v := range h.Values("Content-Transfer-Encoding") {
		if !knownTransfer(v) {
			return transferSentence
		}
	}
	// Round 44: a quoted cookie value written as octal escapes
	// (g="\163\153…") is a guess to Werkzeug and http.cookies, which
	// decode them, and bytes to the guard.
	for _, v := range h.Values("Cookie") {
		if strings.Contains(v, `\`) {
			return cookieSentence
		}
	}
	return ""
}

// canonicalType parses a Content-Type value by the rules, giving its
// media type (lower case) and the boundary of a multipart type.
func canonicalType(v string) (mediatype, boundary string, ok bool) {
	if !printable(v) || strings.Contains(v, "=?") || strings.Contains(v, "*=") || !plainQuotes(v) || !noContinuations(v) {
		return "", "", false
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil || !strings.Contains(mt, "/") {
		return "", "", false
	}
	if cs, has := params["charset"]; has && !asciiCharset(cs) {
		return "", "", false
	}
	if composite := strings.HasPrefix(mt, "multipart/") || strings.HasPrefix(mt, "message/"); composite && !knownComposite[mt] {
		return "", "", false
	}
	if !plainMultipartWords(v, mt) {
		return "", "", false
	}
	if strings.HasPrefix(mt, "multipart/") {
		boundary = params["boundary"]
		if !rfc2046Boundary(boundary) || !boundaryAsWritten(v, boundary) {
			return "", "", false
		}
	}
	return mt, boundary, true
}

// plainQuotes reports a field value with no backslash and no ';' inside
// a quoted string: parameter splitters differ on both (Python's email
// splits at ';' counting quotes, Go's parses quoted-pairs), so one
// boundary to Go could be another to Python.
func plainQuotes(v string) bool {
	quoted := false
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\':
			return false
		case '"':
			quoted = !quoted
		case ';':
			if quoted {
				return false
			}
		}
	}
	return !quoted
}

// knownComposite are the multipart and message types the shape check
// reads as every parser does. Others have rules of their own: Python's
// email gives a multipart/digest's parts the type message/rfc822 (a header
// block the shape check read as content) and reads every block of a
// message/delivery-status as a header block (round 36: a UTF-7 part and
// encoded words hid there). API clients send none of them.
var knownComposite = map[string]bool{
	"multipart/form-data":   true,
	"multipart/mixed":       true,
	"multipart/related":     true,
	"multipart/alternative": true,
	"message/rfc822":        true,
	"message/global":        true,
}

// plainMultipartWords reports a Content-Type in which "multipart" and
// "boundary" stand only where they mean what every parser reads: the
// first as the type of a multipart/* value, the second as the name of its
// one boundary parameter. formidable picks its multipart parser by
// /multipart/i anywhere in the field and takes the first /boundary=/i
// match, even inside another parameter's name (round 40:
// "message/rfc822; boundary=multipartXX", "text/plain; boundary=…" and
// "xboundary=…; boundary=…" each made it parse a body the guard read as
// something else).
func plainMultipartWords(v, mediatype string) bool {
	multipart := strings.HasPrefix(mediatype, "multipart/")
	if !multipart && strings.Contains(strings.ToLower(v), "multipart") {
		return false
	}
	if !multipart {
		return boundaryAssignment.FindStringIndex(v) == nil
	}
	at := boundaryAssignment.FindAllStringIndex(v, -1)
	return len(at) == 1 // the boundary parameter itself (mime.ParseMediaType found it)
}

// boundaryAsWritten reports whether the boundary parameter's value as
// written, from "boundary=" to the next ';' or the end, is the boundary
// Go parsed, bare or quoted: formidable takes /boundary=([^;]+)/, blanks
// before the ';' included, where Go trims them (round 41: "boundary=XX ;"
// was "XX" to the shape check and "XX " to formidable, whose part after
// the guard's closing delimiter the guard read as epilogue).
func boundaryAsWritten(v, boundary string) bool {
	at := boundaryAssignment.FindStringIndex(v)
	if at == nil || !strings.EqualFold(v[at[0]:at[1]], "boundary=") {
		return false
	}
	raw, _, _ := strings.Cut(v[at[1]:], ";")
	return raw == boundary || raw == `"`+boundary+`"`
}

// boundaryAssignment is what formidable's boundary regex begins with.
var boundaryAssignment = regexp.MustCompile(`(?i)boundary\s*=`)

// noContinuations reports a field value whose every '*' outside quoted
// strings is an extended parameter's "*=": RFC 2231 continuations
// ("charset*1=", "boundary*0=") are put together differently by every
// parser (Go needs a *0 section and lets it override the plain
// parameter, Python's email takes a lone *1 and keeps the plain one,
// busboy ignores them), so one boundary or charset to Go was another to
// Python (round 35: the shape check read the body at a boundary Python
// never split at, and a part's charset*1=utf-7 was utf-7 to Python alone).
func noContinuations(v string) bool {
	quoted := false
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			quoted = !quoted
		case '*':
			if !quoted && (i+1 == len(v) || v[i+1] != '=') {
				return false
			}
		}
	}
	return true
}

// rfc2046Boundary reports a boundary of RFC 2046's bchars, 1 to 70 of
// them, not ending in a space (Python's email strips one there, Go's
// parser keeps it).
func rfc2046Boundary(b string) bool {
	if b == "" || len(b) > maxBoundary || b[len(b)-1] == ' ' {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || strings.IndexByte("'()+_,-./:=? ", c) >= 0) {
			return false
		}
	}
	return true
}

// asciiCharset reports a charset in which a value's ASCII bytes are read
// as themselves, so the views read the field as its decoder does.
func asciiCharset(cs string) bool {
	switch strings.ToLower(strings.TrimSpace(cs)) {
	case "utf-8", "us-ascii", "iso-8859-1":
		return true
	}
	return false
}

// knownTransfer reports a Content-Transfer-Encoding the views read.
func knownTransfer(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "7bit", "8bit", "binary", "base64", "quoted-printable", "x-uuencode", "uuencode", "uue", "x-uue":
		return true
	}
	return false
}

// identityTransfer reports a Content-Transfer-Encoding that leaves the
// bytes as they are (absent included): the only ones a composite part
// (multipart/*, message/*) may carry.
func identityTransfer(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "7bit", "8bit", "binary":
		return true
	}
	return false
}

// printable reports a field value of printable ASCII and tabs only.
func printable(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' || c > '~') && c != '\t' {
			return false
		}
	}
	return true
}

// extendedCharsets reports whether every RFC 2231 extended parameter of a
// field value (name*=charset'lang'value) names an ASCII-compatible
// charset, or none: Python decodes filename* by its charset.
func extendedCharsets(v string) bool {
	for {
		i := strings.Index(v, "*=")
		if i < 0 {
			return true
		}
		v = v[i+2:]
		end := strings.IndexByte(v, ';')
		if end < 0 {
			end = len(v)
		}
		if cs, _, has := strings.Cut(v[:end], "'"); has && cs != "" && !asciiCharset(cs) {
			return false
		}
	}
}
