package sandbox

import (
	"sort"
	"strings"

	"github.com/egressd/egressd/internal/secretforms"
)

// WithoutSecrets returns launcher without the bound secrets' variables
// (names) and without every other variable whose value holds one of their
// values (values, NAME -> value) in any form secretforms lists: a manifest
// that also declares ACME_TOKEN, ACME_URL or ACME_BASIC would otherwise
// receive the operator's copies of the same key as they are
// (ACME_TOKEN=V, ACME_URL=https://u:V%2F…@host/ with V percent-encoded,
// ACME_BASIC=base64(u:V)), and the program decodes them. carriers names
// each such variable, the secret whose value it holds and in which form,
// never the value.
func WithoutSecrets(launcher []string, values map[string]string) (out, carriers []string) {
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	forms := map[string][]secretforms.Form{}
	for _, n := range names {
		forms[n] = secretforms.Forms([]byte(values[n]))
	}
	for _, kv := range WithoutNames(launcher, names) {
		k, v, _ := strings.Cut(kv, "=")
		if why := carriedSecret(v, names, forms); why != "" {
			carriers = append(carriers, k+" "+why)
			continue
		}
		out = append(out, kv)
	}
	return out, carriers
}

// carriedSecret says which secret v holds and how ("holds the value of the
// bound secret ACME_KEY, base64-encoded"), or "" when it holds none.
//
// v is read as it is and as every text secretforms.Views decodes it into
// (blanks removed, JSON escapes undone, percent-decoded, base64 runs
// decoded, up to three deep): escapers and wrappers vary, and a program
// can undo any of them. A variable too tangled to check is not passed.
func carriedSecret(v string, names []string, forms map[string][]secretforms.Form) string {
	views, complete := secretforms.Views(v)
	for i, view := range views {
		for _, n := range names {
			if i > 0 && len(forms[n]) > 0 && len(forms[n][0].Bytes) < secretforms.MinBase64Piece {
				continue // a short value turns up by chance in decoded bytes
			}
			for _, f := range forms[n] {
				if !strings.Contains(view, string(f.Bytes)) {
					continue
				}
				how := f.How
				if i > 0 {
					how = "encoded" // found in what decoding it gives
				}
				if how == secretforms.Verbatim {
					return "holds the value of the bound secret " + n
				}
				return "holds the value of the bound secret " + n + ", " + how
			}
		}
	}
	if !complete && len(names) > 0 {
		return "decodes into too many nested forms to check for the bound secrets' values, so it is not passed"
	}
	return ""
}

// caVariables name a CA bundle file to the clients that read one: OpenSSL
// and Go (SSL_CERT_FILE), Node (NODE_EXTRA_CA_CERTS, added to its own
// roots), Python requests and curl.
var caVariables = []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}

// WithoutNames returns launcher without the variables names: a bound
// secret's real value never reaches BuildEnv, so no path from there can
// carry it into the sandbox.
func WithoutNames(launcher []string, names []string) []string {
	drop := map[string]bool{}
	for _, n := range names {
		drop[n] = true
	}
	var out []string
	for _, kv := range launcher {
		if k, _, _ := strings.Cut(kv, "="); !drop[k] {
			out = append(out, kv)
		}
	}
	return out
}

// BrokeredEnv sets, in an environment BuildEnv made, each bound secret's
// variable to its placeholder (NAME=PLACEHOLDER in placeholders) and the
// CA variables to TrustBundlePath, where the sandbox's trust bundle (the
// host's roots and the broker CA) is.
func BrokeredEnv(env []string, placeholders []string) []string {
	set := map[string]string{}
	for _, kv := range placeholders {
		k, v, _ := strings.Cut(kv, "=")
		set[k] = v
	}
	for _, k := range caVariables {
		set[k] = TrustBundlePath
	}
	var out []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); set[k] == "" {
			out = append(out, kv)
		}
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
