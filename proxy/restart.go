package proxy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/egressd/egressd/policy"
)

// needsRestart names the settings of next that differ from cur and that a
// running egressd cannot apply: they were used once, at start, to open a
// file, a socket or a resolver. A reload that changes one is refused, so an
// operator never believes a setting is in force when it is not. Limits,
// timeouts, audit.on_failure, deny rules, exemptions and integrations all
// apply on reload.
func needsRestart(cur, next policy.Config) error {
	var changed []string
	check := func(name string, same bool) {
		if !same {
			changed = append(changed, name)
		}
	}
	check("state_dir", cur.StateDir == next.StateDir)
	check("admin", cur.Admin == next.Admin)
	check("resolvers", slices.Equal(cur.Resolvers, next.Resolvers))
	check("audit.path", cur.Audit.Path == next.Audit.Path)
	check("audit.max_size_mb", cur.Audit.MaxSizeMB == next.Audit.MaxSizeMB)
	check("audit.key_file", cur.Audit.KeyFile == next.Audit.KeyFile)
	check("audit.key_id", cur.Audit.KeyID == next.Audit.KeyID)
	check("audit.checkpoints", cur.Audit.Checkpoints == next.Audit.Checkpoints)
	if len(changed) == 0 {
		return nil
	}
	return fmt.Errorf("the reloaded config changes %s, which only a restart applies; restart egressd, or undo the change to reload the rest", strings.Join(changed, ", "))
}
