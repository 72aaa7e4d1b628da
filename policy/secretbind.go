package policy

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/egressd/egressd/allowlist"
)

// SecretSpec is one binding as the operator wrote it: `run --secret
// NAME=HOST,…` (the value from the launcher's environment) or a config's
// integrations[].secrets[] entry (the value from value_file). It is
// validated against the manifest in force by BindSecrets on every policy
// build, so a new manifest version that stops allowing a bound host cannot
// keep the binding.
type SecretSpec struct {
	At          string // where the operator wrote it, for errors: "--secret NAME", "integrations[0].secrets[1]"
	Name        string
	Hosts       []string
	Placeholder string
	Value       []byte // never printed: errors name At, Name and From
	From        string // where the value came from: "the launcher's environment", a value_file path
}

// PlaceholderPrefix starts every placeholder, so one is recognisable in a
// log and never mistaken for a real key.
const PlaceholderPrefix = "egressd-ph-"

// Bounds of what can be brokered. A value shorter than minSecretValue
// would be found by chance in response bodies, which are scrubbed of it; a
// placeholder shorter than minPlaceholder can be guessed.
const (
	minSecretValue = 8
	MaxSecretValue = 8 << 10
	minPlaceholder = 24
)

// BindSecrets validates the operator's bindings against the manifest m and
// the list in force (the approved entries, which may be narrower than m's
// while a widening waits), and the names passed with --env. A NAME must be
// a key the manifest declares or a passed name; each HOST must be allowed:
// an exact name some entry admits, or a wildcard the list holds as it is
// (it then binds every name it matches). The error names the binding and
// the problem, never the value.
func BindSecrets(m *allowlist.Manifest, inForce []allowlist.Entry, passed []string, specs []SecretSpec) ([]Secret, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	known := map[string]bool{}
	for _, k := range append(append([]string{}, m.EnvKeys...), passed...) {
		known[k] = true
	}
	allowed := allowlist.Compile(inForce)
	var errs []error
	var out []Secret
	seen := map[string]string{}
	for _, sp := range specs {
		s, err := bindOne(sp, known, allowed, inForce)
		if err == nil {
			if other, dup := seen[sp.Name]; dup {
				err = fmt.Errorf("%s: %s is bound twice (also %s)", sp.At, sp.Name, other)
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		seen[sp.Name] = sp.At
		out = append(out, s)
	}
	errs = append(errs, placeholdersApart(out, specs)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func bindOne(sp SecretSpec, known map[string]bool, allowed *allowlist.Matcher, inForce []allowlist.Entry) (Secret, error) {
	fail := func(format string, args ...any) (Secret, error) {
		return Secret{}, fmt.Errorf("%s: "+format, append([]any{sp.At}, args...)...)
	}
	switch {
	case sp.Name == "" || strings.ContainsAny(sp.Name, "= \t\x00"):
		return fail("%q is not a variable name", sp.Name)
	case reservedSecretName(sp.Name):
		return fail("%s is egressd's own variable in the sandbox; it cannot hold a secret", sp.Name)
	case !known[sp.Name]:
		return fail("%s is not a key the manifest declares (auth.fields[].key, preferences[].name) nor a name passed with --env", sp.Name)
	case len(sp.Hosts) == 0:
		return fail("%s is bound to no host", sp.Name)
	}
	if msg := valueProblem(sp.Value); msg != "" {
		return fail("the value of %s (%s) %s", sp.Name, sp.From, msg)
	}
	if msg := PlaceholderProblem(sp.Placeholder); msg != "" {
		return fail("placeholder: %s", msg)
	}
	if bytes.Contains(sp.Value, []byte(sp.Placeholder)) || strings.Contains(sp.Placeholder, string(sp.Value)) {
		return fail("the placeholder of %s and its value (%s) contain one another; choose another placeholder", sp.Name, sp.From)
	}
	s := Secret{Name: sp.Name, Placeholder: sp.Placeholder, Value: sp.Value}
	for _, h := range sp.Hosts {
		e, _, err := allowlist.ParseEntry(h)
		if err != nil {
			return fail("host %v", err)
		}
		if !hostAllowed(e, allowed, inForce) {
			return fail("host %s is not allowed by the manifest's list in force (%s)", e, entryList(inForce))
		}
		for _, prev := range s.Hosts {
			if prev == e {
				return fail("host %s is listed twice", e)
			}
		}
		s.Hosts = append(s.Hosts, e)
	}
	return s, nil
}

// hostAllowed: an exact host some entry admits; a wildcard only if the list
// holds that same wildcard, since it stands for every name it matches.
func hostAllowed(e allowlist.Entry, allowed *allowlist.Matcher, inForce []allowlist.Entry) bool {
	if !e.Wildcard {
		_, ok := allowed.Match(e.Base)
		return ok
	}
	for _, in := range inForce {
		if in == e {
			return true
		}
	}
	return false
}

func entryList(es []allowlist.Entry) string {
	if len(es) == 0 {
		return "none"
	}
	var ss []string
	for _, e := range es {
		ss = append(ss, e.String())
	}
	return strings.Join(ss, " ")
}

// valueProblem says why a value cannot be brokered: it goes into request
// header values, where a control character would split a header or a
// request.
func valueProblem(v []byte) string {
	switch {
	case len(v) == 0:
		return "is empty"
	case len(v) < minSecretValue:
		return fmt.Sprintf("is shorter than %d bytes: responses are scrubbed of it, and so short a value would be replaced wherever it appears by chance", minSecretValue)
	case len(v) > MaxSecretValue:
		return fmt.Sprintf("is longer than %d bytes", MaxSecretValue)
	}
	for _, c := range v {
		if c < 0x20 || c == 0x7f {
			return "holds a control character (a line break or NUL): a header cannot carry it"
		}
		if c >= 0x80 {
			// HTTP gives a header's non-ASCII bytes no one reading: a WSGI
			// origin decodes them as Latin-1 and an echo re-encodes them,
			// so the value came back to the program in a form the scrubber
			// did not know; and a guess sent in a Latin-1 part passed the
			// guard, which looks for the value's own bytes (round 35).
			return "holds a byte outside ASCII, which HTTP header values do not carry one agreed way (an origin echoing it re-encoded would hand it back unscrubbed); broker only ASCII credentials"
		}
	}
	if v[0] == ' ' || v[len(v)-1] == ' ' {
		// HTTP clients trim a header value's edges: the origin would get
		// other bytes than the value, and an echo of them would pass the
		// scrubber, which looks for the value.
		return "starts or ends with a space, which HTTP strips from a header value; remove it (a value_file's one trailing newline is already dropped)"
	}
	return ""
}

// PlaceholderProblem says what is wrong with an operator's placeholder:
// it must start with PlaceholderPrefix, be long enough not to be guessed,
// and use only characters every header and environment carries unchanged.
func PlaceholderProblem(p string) string {
	switch {
	case p == "":
		return "is required: the value the integration's environment carries instead of the secret (\"" + PlaceholderPrefix + "…\")"
	case !strings.HasPrefix(p, PlaceholderPrefix):
		// Not quoted: an operator who put the real key here must not
		// see it printed.
		return fmt.Sprintf("must start with %q", PlaceholderPrefix)
	case len(p) < minPlaceholder:
		return fmt.Sprintf("must be at least %d characters (%d)", minPlaceholder, len(p))
	case len(p) > MaxSecretValue:
		return fmt.Sprintf("must be at most %d characters", MaxSecretValue)
	}
	for _, c := range p[len(PlaceholderPrefix):] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Sprintf("may hold only letters, digits, '-', '_' and '.' after %q", PlaceholderPrefix)
		}
	}
	return ""
}

// placeholdersApart refuses two secrets whose placeholders are equal or
// one inside the other (substituting one would rewrite the other), and a
// placeholder found inside another secret's value or a value inside
// another placeholder.
func placeholdersApart(ss []Secret, specs []SecretSpec) []error {
	at := map[string]string{}
	for _, sp := range specs {
		at[sp.Name] = sp.At
	}
	var errs []error
	for i, a := range ss {
		for _, b := range ss[i+1:] {
			switch {
			case strings.Contains(a.Placeholder, b.Placeholder) || strings.Contains(b.Placeholder, a.Placeholder):
				errs = append(errs, fmt.Errorf("%s: the placeholders of %s and %s are equal or one contains the other", at[b.Name], a.Name, b.Name))
			case bytes.Contains(a.Value, []byte(b.Placeholder)) || bytes.Contains(b.Value, []byte(a.Placeholder)) ||
				strings.Contains(a.Placeholder, string(b.Value)) || strings.Contains(b.Placeholder, string(a.Value)):
				errs = append(errs, fmt.Errorf("%s: a placeholder of %s or %s contains the other's value, or its value the other's placeholder", at[b.Name], a.Name, b.Name))
			}
		}
	}
	return errs
}

// reservedSecretName are the variables egressd itself sets in the sandbox:
// a secret there would be overwritten or would redirect the program's
// proxy or trust store.
func reservedSecretName(name string) bool {
	switch strings.ToUpper(name) {
	case "HOME", "PATH", "HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "NODE_USE_ENV_PROXY",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE":
		return true
	}
	return false
}
