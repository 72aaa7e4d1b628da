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

// TestDeclaredKeysNamingOtherCredentialsOrTheLoaderAreHeldBack: a third-party
// manifest that declares AWS_SECRET_ACCESS_KEY or LD_PRELOAD got the
// launcher's value. Only the operator can let such a key cross.
func TestDeclaredKeysNamingOtherCredentialsOrTheLoaderAreHeldBack(t *testing.T) {
	launcher := []string{"AWS_SECRET_ACCESS_KEY=aws", "GITHUB_TOKEN=gh", "SSH_AUTH_SOCK=/tmp/agent", "ANTHROPIC_API_KEY=a",
		"OPENAI_API_KEY=o", "LD_PRELOAD=/evil.so", "NODE_OPTIONS=--require=/evil.js", "PYTHONSTARTUP=/evil.py", "BASH_ENV=/evil.sh",
		"COFFEE_API_KEY=ok"}
	declared := []string{"AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "SSH_AUTH_SOCK", "ANTHROPIC_API_KEY", "OPENAI_API_KEY",
		"LD_PRELOAD", "NODE_OPTIONS", "PYTHONSTARTUP", "BASH_ENV", "COFFEE_API_KEY"}
	env := strings.Join(BuildEnv(launcher, declared, []string{"GITHUB_TOKEN"}), "\n")
	for _, k := range declared {
		crossed := strings.Contains(env, k+"=")
		if want := k == "COFFEE_API_KEY" || k == "GITHUB_TOKEN"; crossed != want {
			t.Errorf("%s crossed=%v, want %v (held back: %q)", k, crossed, want, HeldBack(k))
		}
	}
	if got := strings.Join(Crossed(launcher, declared, []string{"GITHUB_TOKEN"}), ","); got != "COFFEE_API_KEY,GITHUB_TOKEN" {
		t.Errorf("crossed names %q", got)
	}
}

// TestWellKnownProviderCredentialsAndHooksAreHeldBack: a manifest that
// declared GITHUB_PERSONAL_ACCESS_TOKEN, ANTHROPIC_AUTH_TOKEN,
// CLAUDE_CODE_OAUTH_TOKEN, OPENROUTER_API_KEY, VERCEL_TOKEN or PGPASSFILE got
// the launcher's value, and so did the hooks LUA_INIT, LESSOPEN and
// SSLKEYLOGFILE. The list is a denylist: the manifest's own secret still
// crosses.
func TestWellKnownProviderCredentialsAndHooksAreHeldBack(t *testing.T) {
	held := []string{"GITHUB_PERSONAL_ACCESS_TOKEN", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "OPENROUTER_API_KEY",
		"VERCEL_TOKEN", "PGPASSFILE", "PGSERVICEFILE", "MYSQL_HOST", "DOCKER_CERT_PATH", "OPENAI_ORG_ID", "GH_HOST",
		"GOOGLE_GHA_CREDS_PATH", "AZURE_CLIENT_SECRET", "NPM_TOKEN", "KUBECONFIG",
		"LUA_INIT", "LUA_INIT_5_4", "LESSOPEN", "LESSCLOSE", "SSLKEYLOGFILE", "GIT_SSH_COMMAND", "PERL5DB",
		"RUBYLIB", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS"}
	launcher := []string{"COFFEE_API_KEY=ok", "PAGER_SIZE=ok"}
	for _, k := range held {
		launcher = append(launcher, k+"=leak")
	}
	declared := append([]string{"COFFEE_API_KEY", "PAGER_SIZE"}, held...)
	got := strings.Join(Crossed(launcher, declared, nil), ",")
	if got != "COFFEE_API_KEY,PAGER_SIZE" {
		t.Fatalf("crossed %q, want only COFFEE_API_KEY,PAGER_SIZE", got)
	}
}

// TestHeldBackNamesFromTheResourceBoundsReview pins each name the fourth
// review (issue 19) checked, and the ones found beside them: credentials
// of other services (a Bitwarden or 1Password session, a Terraform or
// Pulumi token) and variables that make an interpreter load code (.NET
// startup hooks and profilers, JVM options that launcher scripts pass to
// java, Erlang flags, PHP ini folders, zsh's dot folder, a package index).
// A manifest's own key, and names that only look alike, still cross.
func TestHeldBackNamesFromTheResourceBoundsReview(t *testing.T) {
	const credential, loader = "a well-known credential of another service", "a variable that changes what the loader or an interpreter loads or trusts"
	for _, tc := range []struct{ name, want string }{
		{"DIGITALOCEAN_ACCESS_TOKEN", credential}, {"BW_SESSION", credential}, {"BWS_ACCESS_TOKEN", credential},
		{"OP_SESSION_my", credential}, {"TF_TOKEN_app_terraform_io", credential}, {"ATLAS_TOKEN", credential},
		{"PULUMI_ACCESS_TOKEN", credential}, {"NGROK_AUTHTOKEN", credential}, {"SNYK_TOKEN", credential},
		{"CODECOV_TOKEN", credential}, {"HOMEBREW_GITHUB_API_TOKEN", credential}, {"DATABRICKS_TOKEN", credential},
		{"XAUTHORITY", credential},
		{"DOTNET_STARTUP_HOOKS", loader}, {"CORECLR_PROFILER_PATH", loader}, {"CORECLR_ENABLE_PROFILING", loader},
		{"COR_PROFILER_PATH", loader}, {"MONO_ENV_OPTIONS", loader}, {"JAVA_OPTS", loader}, {"JAVA_TOOL_OPTIONS", loader},
		{"_JAVA_OPTIONS", loader}, {"MAVEN_OPTS", loader}, {"GRADLE_OPTS", loader}, {"SBT_OPTS", loader}, {"ANT_OPTS", loader},
		{"ERL_AFLAGS", loader}, {"ERL_ZFLAGS", loader}, {"PHP_INI_SCAN_DIR", loader}, {"ZDOTDIR", loader},
		{"RUSTC_WRAPPER", loader}, {"GOTOOLCHAIN", loader}, {"GOENV", loader}, {"PIP_INDEX_URL", loader},
		{"UV_INDEX_URL", loader}, {"UV_EXTRA_INDEX_URL", loader},
		{"COFFEE_API_KEY", ""}, {"CORS_ORIGIN", ""}, {"MAVEN_REPO_NAME", ""}, {"UV_THREADPOOL_SIZE", ""}, {"OPTIONS", ""},
	} {
		if got := HeldBack(tc.name); got != tc.want {
			t.Errorf("HeldBack(%s) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCIAndRegistryCredentialsAreHeldBack is issue 18's sixth review: a
// manifest declaring the launcher's CI or package-registry credential
// (Azure Pipelines' SYSTEM_ACCESSTOKEN, a Buildkite agent token, Poetry's
// per-repository token, uv's publish token, Docker Hub, CircleCI, Sonar)
// received its value. Every variable of a CI system or a registry client's
// publishing credentials is held back by family, not only the names seen.
// A manifest's own key, and names that only begin alike, still cross.
func TestCIAndRegistryCredentialsAreHeldBack(t *testing.T) {
	held := []string{"SYSTEM_ACCESSTOKEN", "BUILDKITE_AGENT_ACCESS_TOKEN", "POETRY_PYPI_TOKEN_PYPI", "POETRY_HTTP_BASIC_CORP_PASSWORD",
		"UV_PUBLISH_TOKEN", "UV_PUBLISH_PASSWORD", "DOCKERHUB_TOKEN", "CIRCLE_TOKEN", "CIRCLECI_TOKEN", "SONAR_TOKEN",
		"TRAVIS_API_TOKEN", "GITLAB_TOKEN", "CI_JOB_TOKEN", "CI_JOB_JWT_V2", "CI_REGISTRY_PASSWORD", "CI_DEPLOY_PASSWORD",
		"ACTIONS_CACHE_URL", "RUNNER_TOKEN", "TWINE_USERNAME", "CARGO_REGISTRY_TOKEN", "CARGO_REGISTRIES_CORP_TOKEN",
		"GEM_HOST_API_KEY", "RUBYGEMS_API_KEY", "HF_TOKEN", "NUGET_API_KEY", "HEX_API_KEY", "COMPOSER_AUTH",
		"JFROG_ACCESS_TOKEN", "ARTIFACTORY_API_KEY", "BITBUCKET_TOKEN", "DRONE_TOKEN", "JENKINS_API_TOKEN",
		"TEAMCITY_TOKEN", "CODEBUILD_WEBHOOK_SECRET", "QUAY_TOKEN", "GRADLE_PUBLISH_SECRET", "SONATYPE_PASSWORD",
		"OSSRH_PASSWORD", "CONAN_PASSWORD", "NX_CLOUD_ACCESS_TOKEN", "TURBO_TOKEN", "FIREBASE_TOKEN", "EXPO_TOKEN",
		"CACHIX_AUTH_TOKEN", "COVERALLS_REPO_TOKEN", "CODACY_PROJECT_TOKEN", "CHROMATIC_PROJECT_TOKEN", "CYPRESS_RECORD_KEY",
		"PERCY_TOKEN", "SEMAPHORE_API_TOKEN", "APPVEYOR_API_TOKEN", "WOODPECKER_TOKEN"}
	own := []string{"CIDR_BLOCK", "CIRCLET_SIZE", "COFFEE_API_KEY", "SONARQUBE_LIKE", "SYSTEM_PROMPT", "TURBOCHARGE"} // sorted, as Crossed is
	var launcher []string
	for _, k := range append(append([]string{}, held...), own...) {
		launcher = append(launcher, k+"=launcher-secret")
	}
	declared := append(append([]string{}, own...), held...)
	if got, want := strings.Join(Crossed(launcher, declared, nil), ","), strings.Join(own, ","); got != want {
		t.Fatalf("crossed %q, want only %q", got, want)
	}
	env := strings.Join(BuildEnv(launcher, declared, []string{"SYSTEM_ACCESSTOKEN"}), "\n")
	if !strings.Contains(env, "SYSTEM_ACCESSTOKEN=launcher-secret") || strings.Contains(env, "SONAR_TOKEN=") {
		t.Fatalf("the operator's name must let a held-back key cross, and only it:\n%s", env)
	}
}
