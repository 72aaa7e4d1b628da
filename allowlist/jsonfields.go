package allowlist

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// fields is one decoded JSON object with exact, case-sensitive keys.
//
// encoding/json matches struct fields case-insensitively, so a struct would
// read {"domains":[…],"DOMAINS":[…]} as whichever came last. Reading through
// a map keeps "DOMAINS" an unknown key, and checkDuplicateKeys refuses a key
// given twice, so egressd reads the same list every other tool shows.
type fields struct {
	m    map[string]json.RawMessage
	path string
	ps   *Problems
}

func objectAt(raw json.RawMessage, path string, ps *Problems) (fields, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		ps.errorf(path, "must be an object")
		return fields{}, false
	}
	return fields{m: m, path: path, ps: ps}, true
}

func (f fields) at(key string) string {
	if f.path == "" {
		return key
	}
	return f.path + "." + key
}

func (f fields) has(key string) bool { _, ok := f.m[key]; return ok }

// requiredString returns the string at key, reporting a missing or mistyped one.
func (f fields) requiredString(key string) (string, bool) {
	raw, ok := f.m[key]
	if !ok {
		f.ps.errorf(f.at(key), "is required")
		return "", false
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		f.ps.errorf(f.at(key), "must be a string")
		return "", false
	}
	return s, true
}

// optionalString returns the string at key; a missing key is "", false and
// no problem, a mistyped one is reported.
func (f fields) optionalString(key string) (string, bool) {
	if !f.has(key) {
		return "", false
	}
	return f.requiredString(key)
}

// array returns the elements at key, reporting a mistyped value.
func (f fields) array(key string) ([]json.RawMessage, bool) {
	raw, ok := f.m[key]
	if !ok {
		return nil, false
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil || a == nil {
		f.ps.errorf(f.at(key), "must be an array")
		return nil, false
	}
	return a, true
}

// object returns the object at key, reporting a mistyped value.
func (f fields) object(key string) (fields, bool) {
	raw, ok := f.m[key]
	if !ok {
		return fields{}, false
	}
	return objectAt(raw, f.at(key), f.ps)
}

// onlyKeys reports every key outside allowed as an error.
func (f fields) onlyKeys(allowed ...string) {
	for k := range f.m {
		known := false
		for _, a := range allowed {
			known = known || k == a
		}
		if !known {
			f.ps.errorf(f.at(k), "unknown key (allowed: "+fmt.Sprint(allowed)+")")
		}
	}
}

// literalOne checks that key holds exactly the JSON number 1.
func (f fields) literalOne(key string) {
	raw, ok := f.m[key]
	if !ok {
		f.ps.errorf(f.at(key), "is required (1)")
		return
	}
	if string(bytes.TrimSpace(raw)) != "1" {
		f.ps.errorf(f.at(key), fmt.Sprintf("must be 1, not %s", capString(string(raw), 40)))
	}
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// checkDuplicateKeys walks the document and returns the path of the first
// object key that appears twice in the same object, or "" if none does.
func checkDuplicateKeys(data []byte) (string, error) {
	var syntax json.RawMessage
	if err := json.Unmarshal(data, &syntax); err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	path, err := dupValue(dec, "", 0)
	if path != "" || err != nil {
		return path, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", errors.New("data after the top-level value")
	}
	return path, nil
}

// maxDepth bounds nesting so a hostile document cannot grow the stack.
const maxDepth = 64

func dupValue(dec *json.Decoder, path string, depth int) (string, error) {
	if depth > maxDepth {
		return "", fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return "", err
			}
			key, _ := kt.(string)
			child := key
			if path != "" {
				child = path + "." + key
			}
			if seen[key] {
				return child, nil
			}
			seen[key] = true
			if p, err := dupValue(dec, child, depth+1); p != "" || err != nil {
				return p, err
			}
		}
		_, err = dec.Token()
		return "", err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if p, err := dupValue(dec, index(path, i), depth+1); p != "" || err != nil {
				return p, err
			}
		}
		_, err = dec.Token()
		return "", err
	}
	return "", nil
}
