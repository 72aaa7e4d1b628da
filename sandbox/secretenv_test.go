package sandbox

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestBoundSecretNeverCrossesEvenWhenDeclaredAndPassed: a declared key the
// operator also passes with --env still reaches the program only as its
// placeholder.
func TestBoundSecretNeverCrossesEvenWhenDeclaredAndPassed(t *testing.T) {
	launcher := []string{"ACME_KEY=sk-live-value-1234", "PATH=/usr/bin", "SSL_CERT_FILE=/home/u/evil.pem"}
	env := BuildEnv(WithoutNames(launcher, []string{"ACME_KEY"}), []string{"ACME_KEY"}, []string{"ACME_KEY", "SSL_CERT_FILE"})
	env = BrokeredEnv(env, []string{"ACME_KEY=egressd-ph-xyz"})
	for _, want := range []string{"ACME_KEY=egressd-ph-xyz", "SSL_CERT_FILE=" + TrustBundlePath, "NODE_EXTRA_CA_CERTS=" + TrustBundlePath,
		"REQUESTS_CA_BUNDLE=" + TrustBundlePath, "CURL_CA_BUNDLE=" + TrustBundlePath} {
		if !slices.Contains(env, want) {
			t.Errorf("missing %s in %v", want, env)
		}
	}
	if strings.Contains(strings.Join(env, "\n"), "sk-live-value") || strings.Contains(strings.Join(env, "\n"), "evil.pem") {
		t.Fatalf("env = %v", env)
	}
}

// encodedCarriers are ways an operator's shell holds a bound secret's value
// v inside another variable: in a URL's userinfo or query (percent-encoded
// as each Go escaper, and every byte escaped in upper and lower hex) and in
// a Basic token or any base64 blob, with 0, 1 or 2 bytes before it (each
// alignment), in both alphabets, with and without padding. Each name says
// how it carries v.
func encodedCarriers(v string) map[string]string {
	all := func(hex string) string {
		var b strings.Builder
		for i := 0; i < len(v); i++ {
			c := v[i]
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
				b.WriteByte(c)
				continue
			}
			b.WriteString(fmt.Sprintf(hex, c))
		}
		return b.String()
	}
	out := map[string]string{
		"URL_QUERY":   "https://api.bound.example/?key=" + url.QueryEscape(v),
		"URL_PATH":    "https://api.bound.example/k/" + url.PathEscape(v) + "/x",
		"URL_USER":    "https://user:" + url.PathEscape(v) + "@api.bound.example/",
		"URL_UPPER":   "https://user:" + all("%%%02X") + "@api.bound.example/",
		"URL_LOWER":   "https://user:" + all("%%%02x") + "@api.bound.example/",
		"URL_USERINF": (&url.URL{Scheme: "https", User: url.UserPassword("u", v), Host: "h.example"}).String(),
	}
	encs := map[string]*base64.Encoding{"STD": base64.StdEncoding, "RAWSTD": base64.RawStdEncoding, "URLB64": base64.URLEncoding, "RAWURL": base64.RawURLEncoding}
	for _, prefix := range []string{"", "u:", "user:"} {
		for _, suffix := range []string{"", "!", "!?"} {
			for name, enc := range encs {
				out[fmt.Sprintf("B64_%s_%d_%d", name, len(prefix), len(suffix))] = "Basic " + enc.EncodeToString([]byte(prefix+v+suffix))
			}
		}
	}
	return out
}

// TestSecretEncodedInAnotherVariableIsHeldBack: only a variable holding
// the value verbatim was held back; ACME_URL=https://user:sk-live%2FA15…@
// and ACME_BASIC=base64(user:KEY) crossed into the sandbox with the key
// in them (round 19 attacker, issue 15). Each is held back, and the
// warning says in which form it held the value.
func TestSecretEncodedInAnotherVariableIsHeldBack(t *testing.T) {
	const v = "sk-live/A15+secret=9f3c2a7e51"
	carriers := encodedCarriers(v)
	launcher := []string{"ACME_KEY=" + v, "ACME_REGION=eu", "PATH=/usr/bin"}
	for k, val := range carriers {
		launcher = append(launcher, k+"="+val)
	}
	out, warned := WithoutSecrets(launcher, map[string]string{"ACME_KEY": v})
	if !slices.Equal(out, []string{"ACME_REGION=eu", "PATH=/usr/bin"}) {
		t.Errorf("crossed: %v", out)
	}
	text := strings.Join(warned, "\n")
	for k := range carriers {
		if !strings.Contains(text, k+" holds the value of the bound secret ACME_KEY") {
			t.Errorf("no warning names %s:\n%s", k, text)
		}
	}
	for _, want := range []string{"percent-encoded", "base64-encoded"} {
		if !strings.Contains(text, want) {
			t.Errorf("no warning says %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "9f3c2a7e51") {
		t.Fatalf("a warning holds the value:\n%s", text)
	}
}

// TestShortSecretBase64PiecesDoNotHoldBackUnrelatedVariables: a stable
// base64 piece of a short value is a few characters that any token may
// hold by chance; those pieces are not looked for, while the value itself
// always is.
func TestShortSecretBase64PiecesDoNotHoldBackUnrelatedVariables(t *testing.T) {
	const v = "abc" // base64 "YWJj", a piece of many unrelated tokens
	launcher := []string{"ACME_KEY=" + v, "OTHER=tok-YWJjZGVm", "VERBATIM=x-abc-y"}
	out, warned := WithoutSecrets(launcher, map[string]string{"ACME_KEY": v})
	if !slices.Equal(out, []string{"OTHER=tok-YWJjZGVm"}) || len(warned) != 1 || !strings.HasPrefix(warned[0], "VERBATIM holds") {
		t.Fatalf("out %v, warned %v", out, warned)
	}
}

// TestSecretWrappedOrEscapedAnyWayIsHeldBack: the standard base64 tool
// wraps at 76 columns (openssl at 64), so a long key's base64 pieces held a
// line break and matched nothing; Python's quote (safe='/') and JavaScript's
// encodeURIComponent escape other sets than the listed ones, and a value
// may be escaped twice (round 20 broker attacker). A carrier is also read
// with its blanks removed, and percent-decoded (up to four times, '+' as
// itself and as a space).
func TestSecretWrappedOrEscapedAnyWayIsHeldBack(t *testing.T) {
	const long = "sk-ant-api03-a15DISTINCT-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-a15END"
	const slashy = "sk-live/A15+secret=9f3c2a7e51(x)!*'"
	wrap := func(s string, n int) string {
		var b strings.Builder
		for len(s) > n {
			b.WriteString(s[:n] + "\n")
			s = s[n:]
		}
		return b.String() + s
	}
	b64 := base64.StdEncoding.EncodeToString([]byte("user:" + long))
	for name, c := range map[string]struct{ value, carrier string }{
		"base64 wrapped at 76":            {long, wrap(b64, 76)},
		"base64 wrapped at 64, CRLF":      {long, strings.ReplaceAll(wrap(b64, 64), "\n", "\r\n")},
		"python quote, safe='/'":          {slashy, "https://u:" + strings.NewReplacer("+", "%2B", "=", "%3D", "(", "%28", ")", "%29", "!", "%21", "*", "%2A", "'", "%27").Replace(slashy) + "@api.example/"},
		"encodeURIComponent keeps !*'()":  {slashy, "k=" + strings.NewReplacer("/", "%2F", "+", "%2B", "=", "%3D").Replace(slashy)},
		"escaped twice":                   {slashy, "k=" + strings.ReplaceAll(url.QueryEscape(slashy), "%", "%25")},
		"form-encoded, a space as a plus": {"sk live 9f3c2a7e51", "k=sk+live+9f3c2a7e51"},
	} {
		out, warned := WithoutSecrets([]string{"ACME_KEY=" + c.value, "CARRIER=" + c.carrier}, map[string]string{"ACME_KEY": c.value})
		if len(out) != 0 || len(warned) != 1 {
			t.Errorf("%s: crossed %q (warned %v)", name, out, warned)
		}
	}
}

// TestSecretInNestedEncodingsIsHeldBack: the forms were looked for in the
// variable, blanks removed or percent-decoded, never combined and never
// inside base64: a form-encoded wrapped base64 blob, a base64'd connection
// string holding the value percent-encoded, a .dockerconfigjson, wrapped
// base64 in a JSON string with \n escapes, and JSON with \/ all crossed
// (round 21 broker attacker). A variable is read as every text decoding
// gives, three steps deep.
func TestSecretInNestedEncodingsIsHeldBack(t *testing.T) {
	const v = "sk-ant-api03-A15x/Zq+9f3c2a7e51Bq0QwErTyUiOpAsDfGhJkL=="
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	wrap := func(s string, n int, sep string) string {
		var b strings.Builder
		for len(s) > n {
			b.WriteString(s[:n] + sep)
			s = s[n:]
		}
		return b.String() + s
	}
	for name, carrier := range map[string]string{
		"form-encoded wrapped base64": "blob=" + url.QueryEscape(wrap(b64(`{"user":"u","key":"`+v+`"}`), 76, "\n")),
		"base64'd connection string":  b64("https://user:" + url.QueryEscape(v) + "@api.bound.example/"),
		".dockerconfigjson":           b64(`{"auths":{"registry.bound.example":{"auth":"` + b64("user:"+v) + `"}}}`),
		"wrapped base64 in JSON":      `{"blob": "` + wrap(b64("user:"+v+"user:"+v), 64, `\n`) + `"}`,
		"JSON with slashes escaped":   `{"key": "` + strings.ReplaceAll(v, "/", `\/`) + `"}`,
		"JSON with unicode escapes":   `{"key": "` + strings.ReplaceAll(v, "+", `\u002b`) + `"}`,
	} {
		out, warned := WithoutSecrets([]string{"ACME_KEY=" + v, "CARRIER=" + carrier, "PATH=/usr/bin"}, map[string]string{"ACME_KEY": v})
		if !slices.Equal(out, []string{"PATH=/usr/bin"}) || len(warned) != 1 || strings.Contains(warned[0], v) {
			t.Errorf("%s: out %q, warned %q", name, out, warned)
		}
	}
}

// TestAVariableTooTangledToCheckIsNotPassed: decoding is bounded (depth,
// count, bytes); a variable that reaches a bound is not taken as clear.
func TestAVariableTooTangledToCheckIsNotPassed(t *testing.T) {
	var b strings.Builder
	for i := range 600 {
		fmt.Fprintf(&b, "%s ", base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("distinct-run-%04d", i))))
	}
	out, warned := WithoutSecrets([]string{"ACME_KEY=sk-live-0123456789", "TANGLED=" + b.String()}, map[string]string{"ACME_KEY": "sk-live-0123456789"})
	if len(out) != 0 || len(warned) != 1 || !strings.Contains(warned[0], "TANGLED decodes into too many nested forms") {
		t.Fatalf("out %d vars, warned %q", len(out), warned)
	}
}

// TestSecretInOtherTextEncodingsIsHeldBack: base64 of UTF-16LE (PowerShell's
// -EncodedCommand), octal escapes, HTML numeric entities, quoted-printable
// and JavaScript's \u{…} crossed (round 22 broker attacker).
func TestSecretInOtherTextEncodingsIsHeldBack(t *testing.T) {
	const v = "sk-live-DISTINCT-9f3c2a7e51"
	each := func(format string) string {
		var b strings.Builder
		for i := 0; i < len(v); i++ {
			fmt.Fprintf(&b, format, v[i])
		}
		return b.String()
	}
	utf16 := make([]byte, 0, 2*len(v))
	for i := 0; i < len(v); i++ {
		utf16 = append(utf16, v[i], 0)
	}
	for name, carrier := range map[string]string{
		"base64 of UTF-16LE": base64.StdEncoding.EncodeToString(utf16),
		"octal escapes":      each(`\%03o`),
		"HTML entities":      each("&#%d;"),
		"quoted-printable":   each("=%02X"),
		"JS \\u{…}":          each(`\u{%x}`),
	} {
		out, warned := WithoutSecrets([]string{"ACME_KEY=" + v, "CARRIER=" + carrier}, map[string]string{"ACME_KEY": v})
		if len(out) != 0 || len(warned) != 1 {
			t.Errorf("%s: out %q, warned %q", name, out, warned)
		}
	}
}
