package sandbox

import (
	"regexp"
	"sort"
	"strings"
)

// baseEnv are the launcher variables every program may keep: they carry no
// secrets and programs misbehave without them.
var baseEnv = []string{"PATH", "TZ", "TERM"}

// localeEnv are LANG and the standard locale categories. They cross only
// with a locale-shaped value: sshd's stock "AcceptEnv LANG LC_*" makes
// them the usual way to carry a value into a session, so neither another
// LC_ name nor a value that is not a locale name may ride along.
var localeEnv = map[string]bool{"LANG": true, "LC_ALL": true, "LC_CTYPE": true, "LC_NUMERIC": true, "LC_TIME": true,
	"LC_COLLATE": true, "LC_MONETARY": true, "LC_MESSAGES": true, "LC_PAPER": true, "LC_NAME": true, "LC_ADDRESS": true,
	"LC_TELEPHONE": true, "LC_MEASUREMENT": true, "LC_IDENTIFICATION": true}

// localeValue is a locale name: "C", "POSIX", "en_GB.UTF-8", "de_DE@euro".
var localeValue = regexp.MustCompile(`^[A-Za-z0-9_.@-]{1,64}$`)

// isLocale says whether k=v is a standard locale variable with a
// locale-shaped value.
func isLocale(k, v string) bool { return localeEnv[k] && localeValue.MatchString(v) }

// proxyURL is the explicit proxy inside every sandbox.
const proxyURL = "http://" + ProxyAddr

// BuildEnv builds the child's environment by allowlist from the launcher's:
// PATH, TZ and TERM; LANG and the standard LC_ categories with a
// locale-shaped value (isLocale); the keys the manifest declares (where
// secrets arrive), except those HeldBack names; the operator's passthrough
// list; the sandbox HOME; and the proxy variables, with NO_PROXY removed.
// Nothing else crosses, and no value is ever logged.
func BuildEnv(launcher []string, declared, passthrough []string) []string {
	env, _ := buildEnv(launcher, declared, passthrough)
	return env
}

// Crossed names the launcher variables BuildEnv passes with their values,
// sorted, for the audit log: names only, never values.
func Crossed(launcher []string, declared, passthrough []string) []string {
	_, crossed := buildEnv(launcher, declared, passthrough)
	return crossed
}

func buildEnv(launcher []string, declared, passthrough []string) (out, crossed []string) {
	keep := map[string]bool{}
	for _, k := range declared {
		if HeldBack(k) == "" {
			keep[k] = true
		}
	}
	for _, k := range append(append([]string{}, baseEnv...), passthrough...) {
		keep[k] = true
	}
	env := map[string]string{}
	for _, kv := range launcher {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if keep[k] || isLocale(k, v) {
			env[k] = v
		}
	}
	delete(env, "NO_PROXY")
	delete(env, "no_proxy")
	for k := range env {
		crossed = append(crossed, k)
	}
	if env["PATH"] == "" {
		env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
		crossed = removeName(crossed, "PATH")
	}
	env["HOME"] = Home
	for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"} {
		env[k] = proxyURL
	}
	env["NODE_USE_ENV_PROXY"] = "1"
	for _, k := range []string{"HOME", "HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy", "NODE_USE_ENV_PROXY"} {
		crossed = removeName(crossed, k) // egressd's own value, not the launcher's
	}
	out = make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	sort.Strings(crossed)
	return out, crossed
}

func removeName(names []string, name string) []string {
	for i, n := range names {
		if n == name {
			return append(names[:i], names[i+1:]...)
		}
	}
	return names
}
