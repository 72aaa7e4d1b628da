package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
)

// StateName names an integration's persistent sandbox state (its state
// folder, its image and, through the folder's owner, its uid) after both
// its id and its manifest's place (policy.ManifestPlace: the folder of a
// standard-named manifest, else the manifest file; absolute, as the
// operator named it, so a deploy link swapped to a new release keeps it).
// An id alone is what a manifest says: a manifest at another place that
// claims the same id gets other state, never this one's. The place is
// hashed, so the name stays short and holds no path; "@" never occurs in
// an id, so no id-only name of an earlier egressd is ever one of these.
func StateName(id, place string) string {
	sum := sha256.Sum256([]byte(place))
	return id + "@" + hex.EncodeToString(sum[:8])
}

// StateImageName is the file name of the state image of the state named
// name (root's runs keep their state in an ext4 image, MountStateImage).
func StateImageName(name string) string { return name + ".ext4" }
