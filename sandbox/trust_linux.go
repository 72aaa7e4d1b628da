package sandbox

import (
	"os"
	"path/filepath"
	"strings"
)

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
