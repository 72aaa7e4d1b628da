package allowlist

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// checkDuplicateKeys walks the document and returns the path of the first
// object key that appears twice in the same object, exactly or differing
// only in case, or "" if none does. The message says which.
//
// Case matters because decoders disagree: encoding/json and many others
// match keys case-insensitively and keep the last spelling, so beside
// "network" a "Network" could be the list another tool shows.
func checkDuplicateKeys(data []byte) (path, msg string, err error) {
	var syntax json.RawMessage
	if err := json.Unmarshal(data, &syntax); err != nil {
		return "", "", syntaxError(data, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	path, msg, err = dupValue(dec, "", 0)
	if path != "" || err != nil {
		return path, msg, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", "", errors.New("data after the top-level value")
	}
	return "", "", nil
}

// syntaxError says where a JSON syntax error is, as line and column
// (counted in characters from 1), so an author can find it.
func syntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	// The offending byte is the last one read, or there was none left.
	at := min(int(se.Offset), len(data))
	if at > 0 && se.Error() != "unexpected end of JSON input" {
		at--
	}
	line, col := 1, 1
	for _, r := range string(data[:at]) {
		col++
		if r == '\n' {
			line, col = line+1, 1
		}
	}
	return fmt.Errorf("not valid JSON at line %d, column %d: %v", line, col, se)
}

// maxDepth bounds nesting so a hostile document cannot grow the stack.
const maxDepth = 64

func dupValue(dec *json.Decoder, path string, depth int) (string, string, error) {
	if depth > maxDepth {
		return "", "", fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return "", "", err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]string{} // folded key -> the key as written
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return "", "", err
			}
			key, _ := kt.(string)
			child := key
			if path != "" {
				child = path + "." + key
			}
			if msg := controlIn(key, "key"); msg != "" {
				return child, msg, nil
			}
			if first, dup := seen[foldKey(key)]; dup {
				if first == key {
					return child, "key appears twice; tools disagree on which one counts", nil
				}
				return child, fmt.Sprintf("key differs from %q only in case; tools disagree on which one counts", first), nil
			}
			seen[foldKey(key)] = key
			if p, m, err := dupValue(dec, child, depth+1); p != "" || err != nil {
				return p, m, err
			}
		}
		_, err = dec.Token()
		return "", "", err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if p, m, err := dupValue(dec, index(path, i), depth+1); p != "" || err != nil {
				return p, m, err
			}
		}
		_, err = dec.Token()
		return "", "", err
	}
	return "", "", nil
}

// controlIn says why s, a key or a kind, is refused when it holds a
// control character (C0 with NUL, DEL, C1), or "" when it holds none. A C
// reader (json-c) ends "network\u0000" at the NUL and reads a second
// "network"; others drop control characters: two readers, two lists.
func controlIn(s, what string) string {
	at := strings.IndexFunc(s, unicode.IsControl)
	if at < 0 {
		return ""
	}
	r, _ := utf8.DecodeRuneInString(s[at:])
	return fmt.Sprintf("%s holds control character U+%04X (%+q); a reader that stops at NUL or drops control characters reads another %s, so tools disagree on what the manifest says", what, r, capString(s, 40), what)
}

// sameKey says whether a and b are one key to some reader. It is the one
// comparison of keys: the case-variant check and the other-format check
// both use it, so a spelling one of them lets through cannot be one the
// other calls the same key (strings.EqualFold there let "permıssions" in).
func sameKey(a, b string) bool { return foldKey(a) == foldKey(b) }

// foldKey maps every spelling that some decoder would take for the same key
// to one string. It covers Unicode simple case folding (strings.EqualFold:
// "K" and the Kelvin sign "K") and encoding/json's own folding, which maps
// a rune through ToLower then ToUpper (so "İ" matches "i").
func foldKey(s string) string {
	var b []byte
	for _, r := range s {
		b = utf8.AppendRune(b, foldRune(unicode.ToUpper(unicode.ToLower(r))))
	}
	return string(b)
}

// foldRune returns the smallest rune of r's simple case-folding orbit.
func foldRune(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}
