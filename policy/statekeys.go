package policy

import (
	"encoding/json"
	"fmt"
	"sort"
)

// The keys egressd writes in each object of the state file. encoding/json
// matches struct fields case-insensitively ("IDS" reads as "ids"), so
// DecodeState checks spellings here first: a state file egressd did not
// write is not read.
var (
	docKeys      = []string{"egressd_state", "writes", "lineage", "ids", "folders"}
	markKeys     = []string{"write", "sha256"}
	recordKeys   = []string{"version", "digest", "approved", "approvals", "pending"}
	approvedKeys = []string{"version", "digest", "entries"}
	folderKeys   = []string{"id", "pending", "by_approval"}
	idChangeKeys = []string{"id", "version", "digest", "approved", "entries", "shown"}
)

// checkStateKeys reports the first key, in the objects that decode into
// structs, that is not spelled as egressd writes it. layout2 says whether
// data is the current layout or the first (records by id).
func checkStateKeys(data []byte, layout2 bool) error {
	top, err := exactObject(data, "", docKeys)
	if !layout2 {
		top, err = exactObject(data, "", nil)
	}
	if err != nil {
		return err
	}
	ids := top
	if layout2 {
		if ids, err = exactObject(top["ids"], "ids", nil); err != nil {
			return err
		}
		folders, err := exactObject(top["folders"], "folders", nil)
		if err != nil {
			return err
		}
		var marks []json.RawMessage
		json.Unmarshal(top["lineage"], &marks)
		for _, raw := range marks {
			if _, err := exactObject(raw, "lineage", markKeys); err != nil {
				return err
			}
		}
		for _, dir := range sortedKeys(folders) {
			f, err := exactObject(folders[dir], dir, folderKeys)
			if err != nil {
				return err
			}
			if raw, ok := f["pending"]; ok {
				if _, err := exactObject(raw, dir+".pending", idChangeKeys); err != nil {
					return err
				}
			}
		}
	}
	for _, id := range sortedKeys(ids) {
		r, err := exactObject(ids[id], id, recordKeys)
		if err != nil {
			return err
		}
		if raw, ok := r["approved"]; ok {
			if _, err := exactObject(raw, id+".approved", approvedKeys); err != nil {
				return err
			}
		}
	}
	return nil
}

// exactObject decodes raw as an object whose keys are all in allowed (any
// key when allowed is nil). null and absent values decode as empty: the
// struct decoder that follows reports them.
func exactObject(raw json.RawMessage, path string, allowed []string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil, nil
	}
	if allowed == nil {
		return m, nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !contains(allowed, k) {
			return nil, fmt.Errorf("%s: key %q is not one egressd writes (%v)", path, k, allowed)
		}
	}
	return m, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
