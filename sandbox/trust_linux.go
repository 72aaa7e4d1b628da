package sandbox

import (
	"os"
	"path/filepath"
	"strings"
)

// systemBundles are the files TLS clients read their roots from when no
// variable names one (OpenSSL on Debian and Alpine, Fedora and RHEL,
// openSUSE): the trust bundle is bound over each the sandbox has, so a
// client that ignores SSL_CERT_FILE trusts the broker CA too.
var systemBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/cert.pem"}

// bindTrustBundle binds the host file bundle read-only at TrustBundlePath
// and over every system bundle inside root, once per file it resolves to
// (Fedora's and Debian's links point into one another). A path that
// resolves outside root (an absolute link, read before the pivot against
// the host's tree) is left alone.
func bindTrustBundle(root, bundle string) error {
	if bundle == "" {
		return nil
	}
	if err := bind(root, bundle, TrustBundlePath, true); err != nil {
		return err
	}
	done := map[string]bool{}
	for _, p := range systemBundles {
		real, err := filepath.EvalSymlinks(filepath.Join(root, p))
		if err != nil || !strings.HasPrefix(real, root+"/") || done[real] {
			continue
		}
		if st, err := os.Stat(real); err != nil || !st.Mode().IsRegular() {
			continue
		}
		done[real] = true
		if err := bind(root, bundle, strings.TrimPrefix(real, root), true); err != nil {
			return err
		}
	}
	return nil
}

// HostTrustBundle returns the host's system roots as PEM: the first of the
// system bundles that exists, or nothing.
func HostTrustBundle() ([]byte, string) {
	for _, p := range systemBundles {
		if data, err := os.ReadFile(p); err == nil {
			return data, p
		}
	}
	return nil, ""
}
