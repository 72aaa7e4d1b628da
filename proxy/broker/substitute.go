package broker

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/egressd/egressd/internal/secretforms"
	"github.com/egressd/egressd/policy"
)

// Substitution happens in request header values only. A request body is
// the integration's own data, and rewriting it would let the integration
// have the origin store the secret where it can read it back (a paste, a
// comment, a profile field). The URL is not rewritten either: a key in a
// URL ends up in the origin's access logs, its CDN's and its analytics;
// an API that wants a key there should be called with a header instead.

// misdirected reports whether the request names a secret it must not: a
// placeholder of a secret not bound to this connection's host, anywhere in
// the request target, a header name or value, or inside a Basic
// credential. Refusing it is fail-closed: the value would never be
// substituted anyway, but an integration that tries is misbehaving, and
// the operator should read about it.
func misdirected(target string, h http.Header, unbound []policy.Secret) bool {
	if len(unbound) == 0 {
		return false
	}
	carries := func(s string) bool {
		for _, sec := range unbound {
			if sec.Placeholder != "" && strings.Contains(s, sec.Placeholder) {
				return true
			}
		}
		return false
	}
	if carries(target) || carries(secretforms.PercentDecoded(target)) {
		return true
	}
	for name, values := range h {
		if carries(name) || carriesFolded(name, unbound) {
			return true
		}
		// Each line, and the lines joined as servers that fold repeated
		// fields read them; and every piece of base64 in them decoded, since
		// origins find a Basic token after no separator, a no-break space or
		// in a list of credentials.
		lines, joined := distinctLines(values, ", ")
		for _, v := range append(lines, joined) {
			if carries(v) {
				return true
			}
			for _, decoded := range base64Runs(v) {
				if carries(decoded) {
					return true
				}
			}
		}
	}
	return false
}

// maxBasicWords bounds the "basic"s base64Runs decodes after, each a
// decode of the rest of the field: a field of thousands would cost as many.
// No origin reads the ninth credential of a list.
const maxBasicWords = 8

// base64Runs decodes v as the most lenient origins would find a token in
// it (Node's Buffer, Python's b64decode: bytes outside the alphabets
// skipped, padding optional, either alphabet): each run of base64
// characters, and all that follows each "basic" in any case, whatever
// separates it ("Basic<token>", "Basic\xa0<token>", a token later in a
// list of credentials, a token with spaces or dots inside).
func base64Runs(v string) []string {
	var pieces []string
	isB64 := func(r rune) bool {
		return r < 0x80 && (r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("+/-_=", r))
	}
	pieces = append(pieces, strings.FieldsFunc(v, func(r rune) bool { return !isB64(r) })...)
	for at, n := indexFold(v, "basic"), 0; at >= 0 && n < maxBasicWords; n++ {
		rest := v[at+len("basic"):]
		pieces = append(pieces, rest)
		next := indexFold(rest, "basic")
		if next < 0 {
			break
		}
		at = len(v) - len(rest) + next
	}
	var out []string
	for _, piece := range pieces {
		if raw, ok := secretforms.LenientBase64(piece); ok {
			out = append(out, raw)
		}
	}
	return out
}

// misdirectedTrailer reports a request trailer that names a secret not
// bound to this connection's host, as misdirected does for the header.
func misdirectedTrailer(trailer http.Header, unbound []policy.Secret) bool {
	return len(trailer) > 0 && misdirected("", trailer, unbound)
}

// carriesFolded looks for a placeholder in a header name whatever its
// case: net/http stores names canonicalised, which changes a placeholder's.
func carriesFolded(name string, unbound []policy.Secret) bool {
	lower := strings.ToLower(name)
	for _, sec := range unbound {
		if sec.Placeholder != "" && strings.Contains(lower, strings.ToLower(sec.Placeholder)) {
			return true
		}
	}
	return false
}

// maxHeaderGrowth bounds how many bytes substitution may add to one
// request's header: a value may be far longer than its placeholder (8 KiB
// for 24 bytes), and a placeholder repeated in a 1 MiB header would make
// egressd build hundreds of megabytes.
const maxHeaderGrowth = 64 << 10

// headerGrowth is how many bytes substituting bound placeholders in h
// would add (raw and inside Basic credentials), without building anything.
func headerGrowth(h http.Header, bound []policy.Secret) int {
	grow := 0
	for _, values := range h {
		for _, v := range values {
			decoded, _, basic := basicCredential(v)
			for _, sec := range bound {
				if sec.Placeholder == "" {
					continue
				}
				n := strings.Count(v, sec.Placeholder)
				if basic {
					n += strings.Count(decoded, sec.Placeholder) * 2 // base64 grows it by a third; count it twice
				}
				grow += n * max(len(sec.Value)-len(sec.Placeholder), 0)
			}
		}
	}
	return grow
}

// Bounds on what an integration can make egressd search for: a Basic
// token egressd builds with a value in it is looked for in every response,
// so the integration, which writes the rest of the token, would pick the
// pattern's length (600 KB of zero bytes before the placeholder made an
// 800 KB token). The bytes it writes around the placeholders are bounded,
// in a Basic credential and in any header value carrying one; the values
// themselves are bounded by policy.MaxSecretValue, their repeats by
// maxHeaderGrowth.
const (
	maxOwnBytes      = 16 << 10 // around the placeholders, in a header value carrying one
	maxOwnBasicBytes = 3 << 10  // around them in a Basic credential (4 KiB once encoded)
)

// oversized reports a header value carrying a bound placeholder with more
// than maxOwnBytes of its own around them, or a Basic credential carrying
// one with more than maxOwnBasicBytes.
func oversized(h http.Header, bound []policy.Secret) bool {
	for _, values := range h {
		for _, v := range values {
			if n, carries := ownBytes(v, bound); carries && n > maxOwnBytes {
				return true
			}
			if decoded, _, ok := basicCredential(v); ok {
				if n, carries := ownBytes(decoded, bound); carries && n > maxOwnBasicBytes {
					return true
				}
			}
		}
	}
	return false
}

// ownBytes is how many bytes of v are not a bound placeholder, and
// whether v carries one.
func ownBytes(v string, bound []policy.Secret) (n int, carries bool) {
	n = len(v)
	for _, sec := range bound {
		if sec.Placeholder == "" {
			continue
		}
		if c := strings.Count(v, sec.Placeholder); c > 0 {
			carries = true
			n -= c * len(sec.Placeholder)
		}
	}
	return max(n, 0), carries
}

// rawInBasic reports a header field holding a bound placeholder as it is
// where the word Basic appears anywhere else in it, in any case: the
// origin decodes a Basic token as base64, and the value substituted there
// as plain text would reach it as bytes it names back ("unknown user ...")
// and no scrub pattern recognises, which the program re-encodes into the
// value (round 16). Origins find the token after a space, a tab, a comma,
// a no-break space or nothing at all ("Basic<token>": Node's /^basic/i and
// a slice, Java's startsWith and trim), so no separator is required here.
// The value enters a Basic credential only inside the token egressd
// encodes.
//
// A field's lines are read joined, as servers that fold repeated fields
// into one value (", ") read them: "Basic dTpw" on one Authorization line
// and the placeholder on the next reach werkzeug as one credential.
func rawInBasic(h http.Header, bound []policy.Secret) bool {
	for _, values := range h {
		rest := strings.Join(values, ", ")
		carries := false
		for _, sec := range bound {
			if sec.Placeholder != "" && strings.Contains(rest, sec.Placeholder) {
				carries = true
				rest = strings.ReplaceAll(rest, sec.Placeholder, " ") // the word is looked for outside placeholders
			}
		}
		if carries && indexFold(rest, "basic") >= 0 {
			return true
		}
	}
	return false
}

// cookieSplit reports a Cookie field carrying a bound placeholder whose
// value holds a ';': HTTP/2 clients (Go's among them) send each cookie as
// a field of its own, cut at ';', and the origin joins them again with
// "; ", so it would echo bytes other than the value, which the scrubber
// does not look for (round 19).
func cookieSplit(h http.Header, bound []policy.Secret) bool {
	joined := strings.Join(h.Values("Cookie"), "; ")
	for _, sec := range bound {
		if sec.Placeholder != "" && bytes.IndexByte(sec.Value, ';') >= 0 && strings.Contains(joined, sec.Placeholder) {
			return true
		}
	}
	return false
}

// indexFold is the byte offset of the first word in s in any case
// (Unicode simple folding, as strings.EqualFold), or -1.
func indexFold(s, word string) int {
	for i := range s {
		n, j := 0, i
		for j < len(s) && n < len(word) {
			_, size := utf8.DecodeRuneInString(s[j:])
			j += size
			n++
		}
		if n == len(word) && strings.EqualFold(s[i:j], word) {
			return i
		}
	}
	return -1
}

// basicCarrying counts the Basic credentials in h that carry a bound
// placeholder: each is a token egressd would build.
func basicCarrying(h http.Header, bound []policy.Secret) int {
	n := 0
	for _, values := range h {
		for _, v := range values {
			if decoded, _, ok := basicCredential(v); ok {
				if _, carries := ownBytes(decoded, bound); carries {
					n++
				}
			}
		}
	}
	return n
}

// substituteHeaders puts, in every value of h, each bound secret's value in
// place of its placeholder, every time it appears, and inside a Basic
// credential (decoded, replaced, encoded again; at most maxBasicPerRequest
// of them, which check enforces: past it a placeholder in Basic stays as
// it is). It returns the names of
// the secrets substituted, and for each Basic credential rewritten the
// pair (sent, as the integration wrote it): an origin that echoes the
// credential must not hand the encoded value back.
func substituteHeaders(h http.Header, bound []policy.Secret) (used []string, echoes []pair) {
	seen := map[string]bool{}
	for name, values := range h {
		for i, v := range values {
			out := v
			for _, sec := range bound {
				if sec.Placeholder != "" && strings.Contains(out, sec.Placeholder) {
					out = strings.ReplaceAll(out, sec.Placeholder, string(sec.Value))
					seen[sec.Name] = true
				}
			}
			// Decoded from what the integration wrote, not from out: a raw
			// placeholder after a token's end, substituted first, made the
			// lenient decode and standard re-encode carry the value rebased
			// ('-' as '+'), a form no scrub pattern covers.
			if decoded, prefix, ok := basicCredential(v); ok && len(echoes) < maxBasicPerRequest {
				replaced := decoded
				for _, sec := range bound {
					if sec.Placeholder != "" && strings.Contains(replaced, sec.Placeholder) {
						replaced = strings.ReplaceAll(replaced, sec.Placeholder, string(sec.Value))
						seen[sec.Name] = true
					}
				}
				if replaced != decoded {
					token := base64.StdEncoding.EncodeToString([]byte(replaced))
					// What the integration wrote, never out: raw substitution
					// may already have put a value in it.
					_, written, _ := strings.Cut(v, " ")
					echoes = append(echoes, pair{from: []byte(token), to: []byte(strings.TrimLeft(written, " "))})
					out = prefix + token
				}
			}
			h[name][i] = out
		}
	}
	for _, sec := range bound {
		if seen[sec.Name] {
			used = append(used, sec.Name)
		}
	}
	return used, echoes
}

// basicCredential decodes "Basic <base64>" (the scheme in any case, RFC
// 7235). It returns the decoded user:password, the text before the token,
// and whether v was a well-formed Basic credential; a malformed one is left
// as it is.
func basicCredential(v string) (decoded, prefix string, ok bool) {
	scheme, token, found := strings.Cut(v, " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	trimmed := strings.TrimLeft(token, " ")
	if trimmed == "" {
		return "", "", false
	}
	// Origins decode leniently (nginx, Node's Buffer take a token without
	// its padding, or in the URL alphabet): so does the check, or another
	// host's placeholder would pass the misdirection check unpadded.
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err := enc.DecodeString(trimmed); err == nil {
			return string(raw), v[:len(v)-len(trimmed)], true
		}
	}
	return "", "", false
}

// pair is one replacement in responses: from, the bytes the integration
// must not see, by to.
type pair struct{ from, to []byte }

// scrubPairs are the replacements for responses on a connection: each
// secret's value by its placeholder and its base64 encodings by the
// placeholder's (encodedPairs), the first layer; then the Basic tokens a
// request to this host was sent with by the tokens the integration wrote,
// each token as the first layer leaves it (scrubSet).
func scrubPairs(secrets []policy.Secret, echoes []pair) scrubSet {
	var set scrubSet
	for _, sec := range secrets {
		if len(sec.Value) > 0 {
			set.values = append(set.values, pair{from: sec.Value, to: []byte(sec.Placeholder)})
			set.values = append(set.values, encodedPairs(sec.Value, []byte(sec.Placeholder))...)
		}
	}
	for _, e := range echoes {
		if len(e.from) > 0 {
			set.built = append(set.built, pair{from: scrubBytes(e.from, set.values), to: e.to})
		}
	}
	return set
}

// pairsPerSecret bounds the pairs one secret adds (its value, and its
// base64 encodings at three alignments in two alphabets), so the
// scrubber's work stays linear in the body with a small constant.
const pairsPerSecret = 1 + 3*2

// encodedPairs are the pieces of value's base64 encodings that do not
// depend on what surrounds it, by the same pieces of the placeholder's:
// for the value starting at each offset mod 3 in a base64 stream, in the
// standard and the URL alphabet. A Basic token egressd built (or any
// base64 blob an origin stored with the value inside) is caught whatever
// was encoded before the value, with no memory of the tokens built: an
// origin that stored one shows it back scrubbed after any number of other
// requests, and after a restart. The one or two characters at each edge
// mix the value's bits with its neighbours' and are left as they are: at
// most the top 4 bits of the value's first byte and the low 4 of its last
// come back (a residual the README names).
func encodedPairs(value, placeholder []byte) []pair {
	var out []pair
	seen := map[string]bool{}
	for align := range 3 {
		for _, enc := range secretforms.Encodings {
			from, to := secretforms.StableBase64(enc, align, value), secretforms.StableBase64(enc, align, placeholder)
			if len(from) == 0 || seen[string(from)] {
				continue
			}
			seen[string(from)] = true
			out = append(out, pair{from: from, to: to})
		}
	}
	return out
}

// scrubHeader replaces, in every value of h, each pair's from by its to,
// and drops every field whose name carries a pair's from in any case.
//
// A name is dropped, not rewritten: net/http canonicalises a name from an
// HTTP/1.1 origin and lowercases one from HTTP/2, so a value in a name
// arrives in another case (a key, or its base64, is read back from that
// by trying the cases), and the match must ignore case. A rewrite would
// splice a placeholder into bytes whose case the transports change again,
// and hand the program the rest of the name and the field's value, which
// the origin put beside the value; nothing of a dropped field reaches it.
// No credential belongs in a field name, so an honest origin loses
// nothing. Names are checked before values, in the same pass, for the 103
// Early Hints, the response header and the trailers alike.
func scrubHeader(h http.Header, set scrubSet) {
	pairs := set.all()
	for name, values := range h {
		if nameCarries(name, pairs) {
			delete(h, name)
			continue
		}
		for i, v := range values {
			h[name][i] = string(set.scrub([]byte(v)))
		}
	}
}

// nameCarries reports whether name holds a pair's from, ignoring case.
func nameCarries(name string, pairs []pair) bool {
	lower := bytes.ToLower([]byte(name))
	for _, p := range pairs {
		if bytes.Contains(lower, bytes.ToLower(p.from)) {
			return true
		}
	}
	return false
}

// distinctLines are a field's values as the checks read them: each
// distinct value once, and the values joined with sep as a server that
// folds repeated fields joins them, each pair of neighbours once (a new
// segment after a line break, which no form holds, where a pair was seen
// already). HTTP/2's header compression lets a program send one value
// fifteen times in a few bytes (round 49: 68 bytes a request decoded to a
// 45 KiB head, checked at 3,000 times an ordinary body's cost per byte
// sent); what is checked now is what is different in it.
func distinctLines(values []string, sep string) (lines []string, joined string) {
	if len(values) < 2 {
		return values, strings.Join(values, sep)
	}
	seen := make(map[string]bool, len(values))
	type pair struct{ a, b string }
	pairs := map[pair]bool{}
	var j strings.Builder
	last := -1 // the index of the value the joined text ends with
	for i, v := range values {
		if !seen[v] {
			seen[v] = true
			lines = append(lines, v)
		}
		if i == 0 {
			continue
		}
		if p := (pair{values[i-1], v}); !pairs[p] {
			pairs[p] = true
			if last != i-1 {
				if last >= 0 {
					j.WriteByte('\n')
				}
				j.WriteString(values[i-1])
			}
			j.WriteString(sep)
			j.WriteString(v)
			last = i
		}
	}
	return lines, j.String()
}
