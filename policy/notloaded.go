package policy

import (
	"errors"
	"fmt"

	"github.com/egressd/egressd/internal/bounded"
	"github.com/egressd/egressd/internal/termsafe"
)

// notLoadedWhy is why a configured manifest has no policy, twice: in full
// for the operator (stderr, the audit log, egressd check), and as a class
// for the integration's own clients.
type notLoadedWhy struct {
	full     string // "path: message"
	toClient string // "path: class; where the operator reads why"
}

// notLoadedFor words err both ways. The client's form carries nothing of
// the file: egressd reads manifests with the operator's rights, so an
// integration that links its manifest to a file it cannot read itself
// (a root-only key file) was shown that file's values, quoted by the
// manifest's own error messages ("id: … (\"sk_live_…\")"), and bytes of a
// JSON error. Nor does it tell a missing file from a bad one or an id
// clash: each would be one bit about a file the integration cannot read.
// Only a read that did not finish is named apart, as its cause (a file
// system that does not answer) is the integration's own.
func notLoadedFor(key string, err error) notLoadedWhy {
	class := "it could not be loaded"
	var nf *bounded.NotFinishedError
	if errors.As(err, &nf) {
		class = "reading it did not finish"
	}
	return notLoadedWhy{
		full:     termsafe.OneLine(fmt.Sprintf("%s: %v", key, err)),
		toClient: termsafe.OneLine(fmt.Sprintf("%s: %s; the operator's log (egressd's stderr and audit log) says why, and egressd check %s shows it", key, class, key)),
	}
}
