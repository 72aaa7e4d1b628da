package allowlist

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/mod/semver"
)

// Format is a manifest format.
type Format uint8

const (
	// Unknown is the zero Format: neither file name nor content said.
	Unknown Format = iota
	// VoiceOS is voiceos.integration.json.
	VoiceOS
	// Sollar is a Sollar mini app's manifest.json.
	Sollar
)

func (f Format) String() string {
	switch f {
	case VoiceOS:
		return "voiceos"
	case Sollar:
		return "sollar"
	}
	return "unknown"
}

// EntriesKey names where a format keeps its network list, for messages that
// tell an author what to edit.
func (f Format) EntriesKey() string {
	if f == Sollar {
		return "network.connect"
	}
	return "permissions[].domains"
}

// File names of the two formats, used to find a manifest in a folder.
const (
	VoiceOSFile = "voiceos.integration.json"
	SollarFile  = "manifest.json"
)

// Runtime is a VoiceOS manifest's runtime. Only local-mcp runs locally, with
// Command and Args, in the integration folder.
type Runtime struct {
	Kind    string // "local-mcp", "remote-mcp" or "hosted"
	Command string
	Args    []string
}

// Manifest is what egressd takes from a manifest: identity, the network
// entries, and for VoiceOS the runtime and the names of the variables
// secrets arrive in.
type Manifest struct {
	Format  Format
	ID      string
	Version string
	Entries []Entry // canonical, de-duplicated, in manifest order
	Runtime Runtime
	EnvKeys []string // auth.fields[].key and preferences[].name
}

// Digest identifies the network list: SHA-256 over the sorted canonical
// entries, so reordering the list does not change it.
func (m *Manifest) Digest() string {
	list := make([]string, len(m.Entries))
	for i, e := range m.Entries {
		list[i] = e.String()
	}
	sort.Strings(list)
	sum := sha256.Sum256([]byte(strings.Join(list, "\n")))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Bounds on what a manifest says, so that the audit log records it whole.
// No spec states a limit (VoiceOS and Sollar give only the patterns). Each
// is well under the audit writer's 256-byte field cap: an id is a
// reverse-DNS name, and 128 bytes is half the longest DNS name, more than
// any real one; a version of 64 bytes holds a pre-release and a 40-hex
// commit as build metadata; a pending "ID VERSION" (193 bytes) fits too.
// MaxEntries is the longest list a policy event records in full.
const (
	MaxIDLength      = 128
	MaxVersionLength = 64
	MaxEntries       = 1024
)

// maxEntriesBeforeWarning is where a list starts to read as a liability
// (VoiceOS: "a short list reads as trustworthy, a long one as a liability").
const maxEntriesBeforeWarning = 20

// The patterns are compiled on first use, not at start-up, which every
// egressd process (the sandbox's init included) would otherwise pay for.
var (
	reverseDNS = lazyRegexp(`^[a-z0-9]+(\.[a-z0-9-]+)+$`)
	// strictSemver is the regular expression published on semver.org.
	strictSemver = lazyRegexp(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	envName      = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// CompareVersions compares two semantic versions that Parse accepted:
// -1, 0 or +1. Build metadata does not count.
func CompareVersions(a, b string) int { return semver.Compare("v"+a, "v"+b) }

// Parse reads a manifest. name is the file name (or "") and picks the
// format; without a known name the content decides. rules may be nil.
//
// It returns the manifest when there is no Error problem, and every problem
// it found either way.
func Parse(name string, data []byte, rules *Rules) (*Manifest, Problems) {
	var ps Problems
	if at := invalidUTF8(data); at >= 0 {
		// encoding/json would read the bytes as U+FFFD; Python's json.load
		// and others refuse the file: one manifest, one meaning.
		ps.errorf("", fmt.Sprintf("invalid UTF-8 at byte %d; a manifest is UTF-8 text", at))
		return nil, ps
	}
	if dup, msg, err := checkDuplicateKeys(data); err != nil {
		ps.errorf("", err.Error())
		return nil, ps
	} else if dup != "" {
		ps.errorf(dup, msg)
		return nil, ps
	}
	top, ok := objectAt(data, "", &ps)
	if !ok {
		return nil, ps
	}
	m := &Manifest{Format: detectFormat(name, top)}
	switch m.Format {
	case VoiceOS:
		parseVoiceOS(top, m, rules)
	case Sollar:
		parseSollar(top, m, rules)
	default:
		if top.has("schemaVersion") && top.has("manifest_version") {
			ps.errorf("", fmt.Sprintf("carries both schemaVersion (%s) and manifest_version (%s); name the file for its format", VoiceOSFile, SollarFile))
		} else {
			ps.errorf("", fmt.Sprintf("not a manifest egressd knows: expected %s (schemaVersion) or %s (manifest_version)", VoiceOSFile, SollarFile))
		}
	}
	refuseOtherFormatKeys(name, top, m.Format)
	if ps.HasErrors() {
		return nil, ps
	}
	return m, ps
}

// invalidUTF8 returns the offset of the first byte that is not UTF-8, or -1.
func invalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// detectFormat picks the format by the file name. Only a file named
// neither way is read by its content, and then only when the content names
// one format: a manifest must mean one thing to every tool that reads it.
func detectFormat(name string, top fields) Format {
	switch filepath.Base(name) {
	case VoiceOSFile:
		return VoiceOS
	case SollarFile:
		return Sollar
	}
	voiceos, sollar := top.has("schemaVersion"), top.has("manifest_version")
	switch {
	case voiceos && !sollar:
		return VoiceOS
	case sollar && !voiceos:
		return Sollar
	}
	return Unknown
}

// networkKeys are the top-level keys under which each format lists hosts.
var networkKeys = map[Format]string{VoiceOS: "permissions", Sollar: "network"}

// refuseOtherFormatKeys reports the other format's network key, in any
// spelling sameKey takes for it: a store showing that list would show hosts egressd never reads.
func refuseOtherFormatKeys(name string, top fields, f Format) {
	if f == Unknown {
		return
	}
	other := Sollar
	if f == Sollar {
		other = VoiceOS
	}
	file := "manifest"
	if base := filepath.Base(name); base == VoiceOSFile || base == SollarFile {
		file = base
	}
	for _, k := range top.keys() {
		if sameKey(k, networkKeys[other]) {
			top.ps.errorf(k, fmt.Sprintf("a %s network key in a %s %s; the file name decides the format, and %s lists hosts in %s", other, f, file, f, f.EntriesKey()))
		}
	}
}

// parseIdentity checks the id and version every format has.
func parseIdentity(top fields, m *Manifest) {
	if id, ok := top.requiredString("id"); ok {
		if len(id) > MaxIDLength {
			top.ps.errorf("id", fmt.Sprintf("%d bytes; an id is at most %d bytes", len(id), MaxIDLength))
		} else if reverseDNS().MatchString(id) {
			m.ID = id
		} else {
			top.ps.errorf("id", fmt.Sprintf("must be reverse-DNS like \"com.you.coffee-tracker\" (%q)", capString(id, 100)))
		}
	}
	if v, ok := top.requiredString("version"); ok {
		if len(v) > MaxVersionLength {
			top.ps.errorf("version", fmt.Sprintf("%d bytes; a version is at most %d bytes", len(v), MaxVersionLength))
		} else if strictSemver().MatchString(v) {
			m.Version = v
		} else {
			top.ps.errorf("version", fmt.Sprintf("must be a semantic version like \"1.0.0\" (%q)", capString(v, 100)))
		}
	}
}

// parseEntries checks one network list and appends its entries to m.
func parseEntries(list []json.RawMessage, path string, m *Manifest, rules *Rules, ps *Problems) {
	before := len(m.Entries)
	seen := make(map[Entry]int, len(m.Entries))
	for i, e := range m.Entries {
		seen[e] = i
	}
	for i, raw := range list {
		at := index(path, i)
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			ps.errorf(at, "must be a string")
			continue
		}
		e, warnings, err := rules.ParseEntry(s)
		if err != nil {
			ps.errorf(at, err.Error())
			continue
		}
		for _, w := range warnings {
			ps.warnf(at, w)
		}
		if _, dup := seen[e]; dup {
			ps.warnf(at, fmt.Sprintf("duplicate entry %q", e.String()))
			continue
		}
		seen[e] = len(m.Entries)
		m.Entries = append(m.Entries, e)
	}
	if len(m.Entries) > MaxEntries && before <= MaxEntries {
		ps.errorf(path, fmt.Sprintf("%d entries; a manifest lists at most %d (the audit log records the whole list in force)", len(m.Entries), MaxEntries))
	} else if len(m.Entries) > maxEntriesBeforeWarning {
		ps.warnf(path, fmt.Sprintf("%d entries: a long list reads as a liability; list only the hosts you call", len(m.Entries)))
	}
}
