package sandbox

import (
	"os"
	"path/filepath"
)

// systemBundles are the files TLS clients read their roots from when no
// variable names one (OpenSSL on Debian and Alpine, Fedora and RHEL,
// openSUSE): the trust bundle is bound over each the sandbox has, so a
// client that ignores SSL_CERT_FILE trusts the broker CA too.
var systemBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/cert.pem"}

// bindTrustBundle binds the host file bundle read-only at TrustBundlePath
// and over every system bundle that is a regular file inside root (a
// symlink is left alone: mounting over it would follow it out of root).
func bindTrustBundle(root, bundle string) error {
	if bundle == "" {
		return nil
	}
	if err := bind(root, bundle, TrustBundlePath, true); err != nil {
		return err
	}
	for _, p := range systemBundles {
		if st, err := os.Lstat(filepath.Join(root, p)); err != nil || !st.Mode().IsRegular() {
			continue
		}
		if err := bind(root, bundle, p, true); err != nil {
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
