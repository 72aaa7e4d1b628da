package allowlist

// Matcher is a compiled allowlist: an exact map and a wildcard-parent map,
// so a match costs two map lookups whatever the number of entries, and
// allocates nothing.
//
// The zero Matcher matches nothing. A Matcher is read-only after Compile and
// safe for concurrent use.
type Matcher struct {
	exact map[string]Entry
	wild  map[string]Entry // keyed by the wildcard's base
	list  []Entry
}

// Compile builds a Matcher from entries.
func Compile(entries []Entry) *Matcher {
	m := &Matcher{exact: make(map[string]Entry), wild: make(map[string]Entry), list: append([]Entry(nil), entries...)}
	for _, e := range entries {
		if e.Wildcard {
			m.wild[e.Base.s] = e
		} else {
			m.exact[e.Base.s] = e
		}
	}
	return m
}

// Match returns the entry that admits n. An exact entry wins over a
// wildcard. "*.x.y" admits "a.x.y" only: not "x.y", not "a.b.x.y".
func (m *Matcher) Match(n Name) (Entry, bool) {
	if m == nil || n.IsZero() {
		return Entry{}, false
	}
	if e, ok := m.exact[n.s]; ok {
		return e, true
	}
	if parent := n.Parent(); parent != "" {
		if e, ok := m.wild[parent]; ok {
			return e, true
		}
	}
	return Entry{}, false
}

// Len returns the number of entries.
func (m *Matcher) Len() int {
	if m == nil {
		return 0
	}
	return len(m.exact) + len(m.wild)
}

// Entries returns the entries the Matcher was compiled from.
func (m *Matcher) Entries() []Entry {
	if m == nil {
		return nil
	}
	return m.list
}
