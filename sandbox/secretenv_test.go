package sandbox

import (
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
