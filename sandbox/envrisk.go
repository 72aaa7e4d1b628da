package sandbox

import "strings"

// A manifest is third-party input: the keys it declares choose which of the
// launcher's variables its program receives. Some names are never the
// integration's own to ask for: credentials of other services, and
// variables that change what the dynamic loader or an interpreter loads.
// Such a declared key crosses only if the operator names it too (--env,
// env_passthrough).

// credentialNames are well-known variables that hold another service's
// secret, or a door to one (an agent socket, a credentials folder).
var credentialNames = map[string]bool{
	"GITHUB_TOKEN": true, "GH_TOKEN": true, "GH_ENTERPRISE_TOKEN": true, "GITHUB_ENTERPRISE_TOKEN": true,
	"GITLAB_TOKEN": true, "CI_JOB_TOKEN": true, "ACTIONS_RUNTIME_TOKEN": true, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": true,
	"NPM_TOKEN": true, "NODE_AUTH_TOKEN": true, "PYPI_TOKEN": true, "TWINE_PASSWORD": true, "CARGO_REGISTRY_TOKEN": true,
	"SSH_AUTH_SOCK": true, "SSH_AGENT_PID": true, "GPG_AGENT_INFO": true, "KRB5CCNAME": true, "NETRC": true,
	"ANTHROPIC_API_KEY": true, "OPENAI_API_KEY": true, "GEMINI_API_KEY": true, "GOOGLE_API_KEY": true,
	"HF_TOKEN": true, "HUGGING_FACE_HUB_TOKEN": true, "MISTRAL_API_KEY": true, "COHERE_API_KEY": true,
	"GOOGLE_APPLICATION_CREDENTIALS": true, "KUBECONFIG": true, "VAULT_TOKEN": true, "CONSUL_HTTP_TOKEN": true,
	"DIGITALOCEAN_TOKEN": true, "HEROKU_API_KEY": true, "CLOUDFLARE_API_TOKEN": true, "SENTRY_AUTH_TOKEN": true,
	"SLACK_TOKEN": true, "SLACK_BOT_TOKEN": true, "STRIPE_API_KEY": true, "TWILIO_AUTH_TOKEN": true,
	"OP_SERVICE_ACCOUNT_TOKEN": true, "DOCKER_AUTH_CONFIG": true, "DOCKER_HOST": true, "DOCKER_CONFIG": true,
	"PGPASSWORD": true, "MYSQL_PWD": true, "DATABASE_URL": true, "REDIS_URL": true,
	"DBUS_SESSION_BUS_ADDRESS": true, "XDG_RUNTIME_DIR": true, "CREDENTIALS_DIRECTORY": true, "NOTIFY_SOCKET": true,
	"GIT_ASKPASS": true, "SSH_ASKPASS": true, "SUDO_ASKPASS": true,
	"ATLAS_TOKEN": true, "HOMEBREW_GITHUB_API_TOKEN": true, "SNYK_TOKEN": true, "CODECOV_TOKEN": true,
	"DATABRICKS_TOKEN": true, "XAUTHORITY": true,
}

// credentialPrefixes are families of another service's credentials: every
// variable of a well-known provider, since their names change (GITHUB_TOKEN,
// GITHUB_PERSONAL_ACCESS_TOKEN, ...). This is a denylist: a provider not
// named here crosses when a manifest declares its key (see
// docs/threat-model.md).
var credentialPrefixes = []string{"AWS_", "AZURE_", "ARM_", "GCLOUD_", "CLOUDSDK_", "GOOGLE_", "GCP_", "ALIBABA_CLOUD_", "OCI_CLI_",
	"GITHUB_", "GH_", "GITLAB_", "ANTHROPIC_", "CLAUDE_", "OPENAI_", "OPENROUTER_", "AZURE_OPENAI_", "GEMINI_", "MISTRAL_",
	"GROQ_", "DEEPSEEK_", "XAI_", "HF_", "HUGGINGFACE_", "REPLICATE_", "TOGETHER_", "PERPLEXITY_", "VERCEL_", "NETLIFY_",
	"CLOUDFLARE_", "CF_API_", "HEROKU_", "FLY_", "SUPABASE_", "DIGITALOCEAN_", "LINODE_", "HCLOUD_", "VAULT_", "CONSUL_",
	"NOMAD_", "TF_VAR_", "TF_TOKEN_", "PG", "MYSQL_", "MONGO", "REDIS_", "DOCKER_", "KUBE", "HELM_", "NPM_", "YARN_NPM_",
	"PYPI_", "TWINE_", "CARGO_REGISTR", "SLACK_", "STRIPE_", "TWILIO_", "SENDGRID_", "SENTRY_", "DATADOG_", "DD_API",
	"OP_", "BW_", "BWS_", "PULUMI_", "NGROK_", "SSH_", "GPG_", "GNUPG"}

// ciNames and ciPrefixes are the credentials a CI runner or a package
// registry client finds in its environment: a launcher running in CI holds
// them, and a manifest that declares one would carry the pipeline's token to
// its own host. A CI system's variables are held back as a family (its names
// change, and few are the integration's own to ask for); a registry's, by
// its publishing and login names.
var ciNames = map[string]bool{
	"SYSTEM_ACCESSTOKEN": true, "GEM_HOST_API_KEY": true, "COMPOSER_AUTH": true, "NUGET_API_KEY": true, "HEX_API_KEY": true,
	"TURBO_TOKEN": true, "FIREBASE_TOKEN": true, "EXPO_TOKEN": true, "CYPRESS_RECORD_KEY": true, "PERCY_TOKEN": true,
}

var ciPrefixes = []string{
	// CI systems: GitLab's CI_JOB_TOKEN, CI_REGISTRY_PASSWORD, ...; GitHub
	// Actions' runner; Buildkite, CircleCI, Travis, Jenkins and the rest.
	"CI_", "ACTIONS_", "RUNNER_", "BUILDKITE_", "CIRCLE_", "CIRCLECI_", "TRAVIS_", "JENKINS_", "TEAMCITY_", "BITBUCKET_",
	"DRONE_", "WOODPECKER_", "SEMAPHORE_", "APPVEYOR_", "CODEBUILD_",
	// Registries and the services a pipeline publishes to.
	"POETRY_", "UV_PUBLISH_", "DOCKERHUB_", "QUAY_", "RUBYGEMS_", "CARGO_REGISTR", "JFROG_", "ARTIFACTORY_", "SONAR_",
	"SONATYPE_", "OSSRH_", "GRADLE_PUBLISH_", "CONAN_", "NX_CLOUD_", "CACHIX_", "COVERALLS_", "CODACY_", "CHROMATIC_",
}

// loaderNames change what the loader or an interpreter reads or trusts.
var loaderNames = map[string]bool{
	"NODE_OPTIONS": true, "NODE_PATH": true, "NODE_EXTRA_CA_CERTS": true, "NODE_TLS_REJECT_UNAUTHORIZED": true,
	"NODE_REPL_EXTERNAL_MODULE": true, "ELECTRON_RUN_AS_NODE": true, "BASH_ENV": true, "ENV": true, "SHELLOPTS": true,
	"BASHOPTS": true, "PS4": true, "PROMPT_COMMAND": true, "IFS": true, "CDPATH": true, "PERL5LIB": true, "PERL5OPT": true,
	"PERLLIB": true, "RUBYOPT": true, "RUBYLIB": true, "GCONV_PATH": true, "LOCPATH": true, "NLSPATH": true,
	"HOSTALIASES": true, "RESOLV_HOST_CONF": true, "GLIBC_TUNABLES": true, "JAVA_TOOL_OPTIONS": true, "_JAVA_OPTIONS": true,
	"JDK_JAVA_OPTIONS": true, "CLASSPATH": true, "LUA_PATH": true, "LUA_CPATH": true, "PHPRC": true, "TCLLIBPATH": true,
	"OPENSSL_CONF": true, "OPENSSL_ENGINES": true, "SSL_CERT_FILE": true, "SSL_CERT_DIR": true, "CURL_CA_BUNDLE": true,
	"REQUESTS_CA_BUNDLE": true, "GOFLAGS": true, "TMPDIR": true,
	// JVM options that launcher scripts pass to java (-javaagent loads code).
	"JAVA_OPTS": true, "MAVEN_OPTS": true, "GRADLE_OPTS": true, "SBT_OPTS": true, "ANT_OPTS": true,
	"ZDOTDIR": true, "RUSTC_WRAPPER": true, "RUSTC": true, "GOTOOLCHAIN": true, "GOENV": true,
	"EDITOR": true, "VISUAL": true, "PAGER": true, "MANPAGER": true, "GIT_PAGER": true, "BROWSER": true,
}

// loaderPrefixes are families of such variables.
var loaderPrefixes = []string{"LD_", "DYLD_", "PYTHON", "GIT_", "MALLOC_", "NPM_CONFIG_", "npm_config_", "LUA_INIT", "LUA_PATH",
	"LUA_CPATH", "LESS", "PERL5", "PERL_", "RUBY", "GEM_", "BUNDLE_", "JAVA_", "_JAVA_", "JDK_", "NODE_", "DENO_", "BUN_",
	"PHP_INI", "R_PROFILE", "R_ENVIRON", "JULIA_", "ERL_", "ELIXIR_", "DOTNET_", "COMPlus_", "CORECLR_", "COR_", "MONO_",
	"GOFLAGS", "GOPROXY", "PIP_", "UV_INDEX", "UV_EXTRA_INDEX", "UV_DEFAULT_INDEX",
	"SSLKEYLOGFILE", "OPENSSL_"}

// HeldBack says why a key a manifest declares is not passed unless the
// operator names it too, or "" when it may cross.
func HeldBack(key string) string {
	switch {
	case credentialNames[key] || hasAnyPrefix(key, credentialPrefixes) || ciNames[key] || hasAnyPrefix(key, ciPrefixes):
		return "a well-known credential of another service"
	case loaderNames[key] || hasAnyPrefix(key, loaderPrefixes):
		return "a variable that changes what the loader or an interpreter loads or trusts"
	}
	return ""
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
