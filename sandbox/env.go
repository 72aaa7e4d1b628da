package sandbox

import (
	"sort"
	"strings"
)

// baseEnv are the launcher variables every program may keep: they carry no
// secrets and programs misbehave without them.
var baseEnv = []string{"PATH", "LANG", "TZ", "TERM"}

// proxyURL is the explicit proxy inside every sandbox.
const proxyURL = "http://" + ProxyAddr

// BuildEnv builds the child's environment by allowlist from the launcher's:
// PATH, LANG, LC_*, TZ and TERM; the keys the manifest declares (where
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
		if keep[k] || strings.HasPrefix(k, "LC_") {
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
