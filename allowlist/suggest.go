package allowlist

import (
	"encoding/json"
	"sort"
)

// minSiblingsForWildcard is how many sibling hosts must have been seen
// before Siblings names their parent.
const minSiblingsForWildcard = 3

// Suggest returns the minimal network list covering hosts (canonical names
// seen on the wire): the exact hosts. It never proposes a wildcard: the
// log cannot tell a parent the integration's author owns from one where
// anyone creates names (round 45: three buckets tried under
// storage.googleapis.com and three names under dnslog.cn, all refused,
// became *.storage.googleapis.com and *.dnslog.cn, which reach every
// bucket and a DNS-exfiltration service). Siblings says where one might
// do. Hosts that are not valid entries (an IP, a special-use name) are
// skipped and returned separately.
func Suggest(hosts []string, rules *Rules) (entries []string, skipped []string) {
	seen := map[string]bool{}
	for _, h := range hosts {
		e, _, err := rules.ParseEntry(h)
		if err != nil || e.Wildcard {
			skipped = append(skipped, h)
			continue
		}
		if !seen[e.String()] {
			seen[e.String()] = true
			entries = append(entries, e.String())
		}
	}
	sort.Strings(entries)
	return entries, skipped
}

// Siblings are the wildcards over the parents under which entries holds
// several names, each a valid entry by rules: what an operator who owns
// that parent may write instead of the names.
func Siblings(entries []string, rules *Rules) []string {
	byParent := map[string]int{}
	for _, s := range entries {
		if e, _, err := rules.ParseEntry(s); err == nil && !e.Wildcard && e.Base.Parent() != "" {
			byParent[e.Base.Parent()]++
		}
	}
	var out []string
	for parent, n := range byParent {
		if n < minSiblingsForWildcard {
			continue
		}
		if w, _, err := rules.ParseEntry("*." + parent); err == nil {
			out = append(out, w.String())
		}
	}
	sort.Strings(out)
	return out
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
