package policy

import "github.com/egressd/egressd/allowlist"

// EntryFor is the config entry serve would serve manifest (a folder or a
// manifest file) under, and whether there is one: the first whose
// manifest has the same place (ManifestPlace), the key version memory and
// serve go by, so a second entry of that place is one serve refuses. The
// place is compared as
// written, never by what the files are: an author whose manifest is a
// link to another integration's must not lend that integration its
// entry's exemptions, widen or pin_digest in explain or run (round 34:
// matched by inode, the last entry won), and a deploy link and the
// release folder it names are two places, as they are to serve.
func (c Config) EntryFor(manifest string) (Integration, bool) {
	file, err := allowlist.Locate(manifest)
	if err != nil {
		return Integration{}, false // it does not load either: no entry lends it anything
	}
	place := ManifestPlace(file)
	for _, in := range c.Integrations {
		if f, err := allowlist.Locate(in.Manifest); err == nil && ManifestPlace(f) == place {
			return in, true
		}
	}
	return Integration{}, false
}
