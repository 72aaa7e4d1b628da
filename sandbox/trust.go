package sandbox

import "os"

// systemBundles are the files TLS clients read their roots from when no
// variable names one (OpenSSL on Debian and Alpine, Fedora and RHEL,
// openSUSE): the trust bundle is bound over each the sandbox has, so a
// client that ignores SSL_CERT_FILE trusts the broker CA too.
var systemBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/cert.pem"}

// HostTrustBundle returns the host's system roots as PEM: the first of the
// system bundles that exists, or nothing.
func HostTrustBundle() []byte {
	for _, p := range systemBundles {
		if data, err := os.ReadFile(p); err == nil {
			return data
		}
	}
	return nil
}
