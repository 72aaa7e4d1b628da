package allowlist

import (
	"encoding/json"
	"sort"
)

// minSiblingsForWildcard is how many sibling hosts must have been seen
// before a wildcard is proposed over them.
const minSiblingsForWildcard = 3

// Suggest returns the minimal network list covering hosts (canonical names
// seen on the wire): exact hosts, with a single-label wildcard only where
// several siblings were seen and the wildcard passes every entry rule.
// Hosts that are not valid entries (an IP, a special-use name) are skipped
// and returned separately.
func Suggest(hosts []string, rules *Rules) (entries []string, skipped []string) {
	byParent := map[string][]Entry{}
	for _, h := range hosts {
		e, _, err := rules.ParseEntry(h)
		if err != nil || e.Wildcard {
			skipped = append(skipped, h)
			continue
		}
		byParent[e.Base.Parent()] = append(byParent[e.Base.Parent()], e)
	}
	seen := map[string]bool{}
	for parent, es := range byParent {
		if len(es) >= minSiblingsForWildcard && parent != "" {
			if w, _, err := rules.ParseEntry("*." + parent); err == nil && !seen[w.String()] {
				seen[w.String()] = true
				entries = append(entries, w.String())
				continue
			}
		}
		for _, e := range es {
			if !seen[e.String()] {
				seen[e.String()] = true
				entries = append(entries, e.String())
			}
		}
	}
	sort.Strings(entries)
	return entries, skipped
}

// NetworkFragment renders entries as the JSON to paste into a manifest of
// the given format: a VoiceOS permissions[] element or a Sollar "network"
// member.
func NetworkFragment(f Format, entries []string) ([]byte, error) {
	if entries == nil {
		entries = []string{}
	}
	if f == Sollar {
		return json.MarshalIndent(map[string]any{"network": map[string]any{"connect": entries}}, "", "  ")
	}
	return json.MarshalIndent(map[string]any{"kind": "network", "domains": entries}, "", "  ")
}
