package broker

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// escapedForms are s and the inner text of every quoting of it that
// egressd or the libraries it uses print: Go's %q and %+q
// (strconv.Quote, QuoteToASCII, QuoteToGraphic), JSON with and without
// HTML escaping, and each of those quoted once more (an error that quotes
// an error). Longest first, so no form is cut by a shorter one's
// replacement.
func escapedForms(s string) []string {
	seen := map[string]bool{s: true}
	forms := []string{s}
	add := func(f string) {
		if f != "" && !seen[f] {
			seen[f] = true
			forms = append(forms, f)
		}
	}
	for _, once := range quotings(s) {
		add(once)
		for _, twice := range quotings(once) {
			add(twice)
		}
	}
	sort.SliceStable(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	return forms
}

// quotings are the inner texts (no surrounding quotes) of s quoted each
// way escapedForms names.
func quotings(s string) []string {
	inner := func(q string) string { return strings.TrimSuffix(strings.TrimPrefix(q, `"`), `"`) }
	out := []string{inner(strconv.Quote(s)), inner(strconv.QuoteToASCII(s)), inner(strconv.QuoteToGraphic(s))}
	for _, html := range []bool{true, false} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(html)
		if enc.Encode(s) == nil {
			out = append(out, inner(strings.TrimSuffix(buf.String(), "\n")))
		}
	}
	return out
}
