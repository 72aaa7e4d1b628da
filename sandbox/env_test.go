package sandbox

import (
	"strings"
	"testing"
)

func TestBuildEnvKeepsOnlyTheAllowlist(t *testing.T) {
	launcher := []string{"PATH=/usr/bin", "LANG=C.UTF-8", "LC_ALL=C", "AWS_SECRET_ACCESS_KEY=leak", "COFFEE_API_KEY=declared",
		"HOME=/root", "SSH_AUTH_SOCK=/tmp/agent", "NO_PROXY=*", "HTTPS_PROXY=http://elsewhere", "OPERATOR_VAR=x", "LD_PRELOAD=/evil.so"}
	env := strings.Join(BuildEnv(launcher, []string{"COFFEE_API_KEY"}, []string{"OPERATOR_VAR"}), "\n")
	for _, want := range []string{"PATH=/usr/bin", "LANG=C.UTF-8", "LC_ALL=C", "COFFEE_API_KEY=declared", "OPERATOR_VAR=x", "HOME=/home/sandbox",
		"HTTPS_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128", "ALL_PROXY=http://127.0.0.1:3128", "NODE_USE_ENV_PROXY=1"} {
		if !strings.Contains(env, want+"\n") && !strings.HasSuffix(env, want) {
			t.Errorf("missing %s", want)
		}
	}
	for _, leak := range []string{"AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK", "NO_PROXY", "/root", "http://elsewhere", "LD_PRELOAD"} {
		if strings.Contains(env, leak) {
			t.Errorf("%s reached the child", leak)
		}
	}
}
