package broker

import (
	"encoding/base64"
	"net/http"
	"strings"
)

// The guard judges the request as the program wrote it, so what goes
// upstream must be those bytes. Go's ReverseProxy re-encodes a query that
// holds a ';' or a malformed '%' escape, or more than maxQueryParams
// parameters (httputil's cleanQueryParams: ParseQuery, then Encode): a
// guess written winter%202019 went out as winter+2019, and a bare key as
// "key=" (round 29). And the transport writes a path through
// url.URL.EscapedPath, which escapes again a raw path it does not take
// as valid (a '{' goes out as %7B). Such a request is refused, not
// judged again after the rewrite: honest API clients do not send them,
// a refusal is one rule about the request's own bytes (no new oracle,
// no second guard to keep in step with the first), and whatever
// ReverseProxy's cleaning does next, rewrite also puts the written query
// back (a GODEBUG urlmaxqueryparams re-encodes every query).
//
// A Basic credential egressd cannot decode itself is refused too: it
// would go out as written, neither judged nor substituted, and lenient
// origins (Node's Buffer, Python's b64decode) skip the bytes outside the
// alphabet that egressd's strict decoders stop at ('.' between pairs of
// characters decoded to a guess). No honest client sends one.

// maxQueryParams is httputil's defaultMaxParams: past it, ReverseProxy
// re-encodes the query.
const maxQueryParams = 10000

// Sentences of the bad_request refusals malformed gives.
const (
	rewrittenQuerySentence = "egressd: the query holds a ';', a '%' not followed by two hex digits, or more than 10000 parameters; egressd would forward it re-encoded, not as written, so it refuses it: write ';' as %3B and '%' as %25"
	rewrittenPathSentence  = "egressd: the path holds characters that must be percent-encoded (like { } | \" or a space); egressd would forward it re-encoded, not as written, so it refuses it: percent-encode them"
	malformedBasicSentence = "egressd: the Authorization header's Basic credential is not valid base64 (standard or URL alphabet, padded or not); egressd forwards only a credential it can read itself"
)

// malformed is the sentence a bad_request refusal of r answers with, or
// "" when egressd forwards r as written.
func malformed(r *http.Request) string {
	if queryRewritten(r.URL.RawQuery) {
		return rewrittenQuerySentence
	}
	if r.URL.RawPath != "" && r.URL.EscapedPath() != r.URL.RawPath {
		return rewrittenPathSentence
	}
	for _, v := range r.Header.Values("Authorization") {
		if unreadableBasic(v) {
			return malformedBasicSentence
		}
	}
	return ""
}

// queryRewritten reports a query ReverseProxy would re-encode: the test
// cleanQueryParams makes, and no other.
func queryRewritten(q string) bool {
	if strings.Count(q, "&")+1 > maxQueryParams {
		return true
	}
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case ';':
			return true
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return true
			}
			i += 2
		}
	}
	return false
}

// unreadableBasic reports a Basic credential (the scheme in any case)
// whose token, spaces trimmed, is not base64 in one alphabet, padded or
// not.
func unreadableBasic(v string) bool {
	scheme, token, _ := strings.Cut(strings.TrimSpace(v), " ")
	if !strings.EqualFold(scheme, "Basic") {
		return false
	}
	token = strings.TrimSpace(token)
	if token == "" || strings.ContainsAny(token, "\r\n") { // Go's decoders skip line breaks
		return true
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if _, err := enc.DecodeString(token); err == nil {
			return false
		}
	}
	return true
}
