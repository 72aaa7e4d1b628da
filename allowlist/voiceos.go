package allowlist

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// parseVoiceOS reads voiceos.integration.json: schemaVersion 1, id, version,
// runtime, and permissions entries of kind "network" with "domains".
// Fields egressd does not use (tools, intents, …) are not checked.
func parseVoiceOS(top fields, m *Manifest, rules *Rules) {
	ps := top.ps
	top.literalOne("schemaVersion")
	parseIdentity(top, m)
	parseRuntime(top, m)

	perms, _ := top.array("permissions")
	networks := 0
	for i, raw := range perms {
		p, ok := objectAt(raw, index("permissions", i), ps)
		if !ok {
			continue
		}
		kind, ok := p.requiredString("kind")
		if !ok {
			continue
		}
		if kind != "network" {
			notNetwork(p, kind)
			continue
		}
		p.onlyKeys("kind", "domains")
		domains, ok := p.array("domains")
		if !ok {
			if !p.has("domains") {
				ps.errorf(p.at("domains"), "is required in a network permission")
			}
			continue
		}
		// A reader that takes the first network permission would see a
		// narrower list than a merge: one list, in one permission.
		if networks++; networks > 1 {
			ps.errorf(p.path, "a second network permission; list every domain in one")
			continue
		}
		parseEntries(domains, p.at("domains"), m, rules, ps)
	}
	m.EnvKeys = append(envKeys(top, "auth", "fields", "key"), envKeys(top, "", "preferences", "name")...)
}

// notNetwork checks a permission egressd does not read. If another reader
// could take it for the network list (its kind is "network" once case is
// folded or space trimmed, or it carries "domains"), the manifest would
// mean two things, so it is an error.
func notNetwork(p fields, kind string) {
	switch msg := controlIn(kind, "kind"); {
	case msg != "":
		p.ps.errorf(p.at("kind"), msg)
	case strings.EqualFold(strings.TrimSpace(kind), "network"):
		p.ps.errorf(p.at("kind"), fmt.Sprintf("must be exactly \"network\" (%+q): a reader that folds case or trims would take this permission for the network list", capString(kind, 40)))
	case p.has("domains"):
		p.ps.errorf(p.at("kind"), fmt.Sprintf("a permission with \"domains\" must be of kind \"network\" (%+q)", capString(kind, 40)))
	}
}

func parseRuntime(top fields, m *Manifest) {
	rt, ok := top.object("runtime")
	if !ok {
		if !top.has("runtime") {
			top.ps.errorf("runtime", "is required")
		}
		return
	}
	kind, _ := rt.requiredString("kind")
	m.Runtime.Kind = kind
	switch kind {
	case "local-mcp":
		if cmd, ok := rt.requiredString("command"); ok {
			m.Runtime.Command = cmd
			checkCommand(rt, cmd)
		}
		args, _ := rt.array("args")
		for i, raw := range args {
			var a string
			if err := json.Unmarshal(raw, &a); err != nil {
				top.ps.errorf(index(rt.at("args"), i), "must be a string")
				continue
			}
			m.Runtime.Args = append(m.Runtime.Args, a)
		}
	case "remote-mcp", "hosted", "":
	default:
		top.ps.errorf(rt.at("kind"), fmt.Sprintf("must be \"local-mcp\", \"remote-mcp\" or \"hosted\" (%q)", capString(kind, 40)))
	}
}

// checkCommand refuses a runtime command that names a host path outside
// the integration folder: the sandbox binds the program in, so such a path
// would let a third-party manifest choose what of the host the sandboxed
// program sees. A bare name is looked up in the launcher's PATH; a
// relative path stays inside the folder. An operator who means another
// program passes it to egressd run after "--".
func checkCommand(rt fields, cmd string) {
	if cmd != "" && filepath.IsLocal(cmd) {
		return
	}
	rt.ps.errorf(rt.at("command"), fmt.Sprintf("must be a program name (looked up in the launcher's PATH) or a path inside the integration folder (%q): "+
		"a manifest does not choose host paths; an operator can pass the program after --", capString(cmd, 100)))
}

// envKeys collects the variable names secrets and settings arrive in:
// obj.list[].key. A malformed one is a warning: it is simply not passed
// into a sandbox.
func envKeys(top fields, obj, list, key string) []string {
	holder := top
	if obj != "" {
		var ok bool
		if holder, ok = top.object(obj); !ok {
			return nil
		}
	}
	items, _ := holder.array(list)
	var keys []string
	for i, raw := range items {
		f, ok := objectAt(raw, index(holder.at(list), i), top.ps)
		if !ok {
			continue
		}
		name, ok := f.optionalString(key)
		if !ok {
			continue
		}
		if !envName().MatchString(name) {
			top.ps.warnf(f.at(key), fmt.Sprintf("not a variable name, so it is not passed to a sandbox (%q)", capString(name, 64)))
			continue
		}
		keys = append(keys, name)
	}
	return keys
}
