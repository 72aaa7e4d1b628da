package allowlist

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// fields is one decoded JSON object with exact, case-sensitive keys.
//
// encoding/json matches struct fields case-insensitively, so a struct would
// read {"domains":[…],"DOMAINS":[…]} as whichever came last. Reading through
// a map keeps "DOMAINS" an unknown key, and checkDuplicateKeys refuses a key
// given twice, so egressd reads the same list every other tool shows.
//
// A key egressd looks up that is present only in another case ("Network"
// with no "network") is an error too: a case-insensitive reader takes it
// for the key egressd reads as absent. Every lookup goes through lookup,
// which reports such spellings once per object.
type fields struct {
	m       map[string]json.RawMessage
	path    string
	ps      *Problems
	checked map[string]bool // keys already checked for other-case spellings
}

func objectAt(raw json.RawMessage, path string, ps *Problems) (fields, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		ps.errorf(path, "must be an object")
		return fields{}, false
	}
	return fields{m: m, path: path, ps: ps, checked: map[string]bool{}}, true
}

// lookup returns the value at key, exactly spelled, and reports every key
// of the object that differs from it only in case.
func (f fields) lookup(key string) (json.RawMessage, bool) {
	if f.checked != nil && !f.checked[key] {
		f.checked[key] = true
		for _, k := range f.keys() {
			if k != key && sameKey(k, key) {
				f.ps.errorf(f.at(k), fmt.Sprintf("key differs from %q only in case; egressd reads only %q, and a case-insensitive reader would read this one", key, key))
			}
		}
	}
	raw, ok := f.m[key]
	return raw, ok
}

func (f fields) at(key string) string {
	if f.path == "" {
		return key
	}
	return f.path + "." + key
}

func (f fields) has(key string) bool { _, ok := f.lookup(key); return ok }

// keys returns the object's keys in sorted order, so problems come out in
// the same order every time.
func (f fields) keys() []string {
	out := make([]string, 0, len(f.m))
	for k := range f.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// requiredString returns the string at key, reporting a missing or mistyped one.
func (f fields) requiredString(key string) (string, bool) {
	raw, ok := f.lookup(key)
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
	raw, ok := f.lookup(key)
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
	raw, ok := f.lookup(key)
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
	raw, ok := f.lookup(key)
	if !ok {
		f.ps.errorf(f.at(key), "is required (1)")
		return
	}
	if string(bytes.TrimSpace(raw)) != "1" {
		f.ps.errorf(f.at(key), fmt.Sprintf("must be 1, not %s", capString(string(raw), 40)))
	}
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
