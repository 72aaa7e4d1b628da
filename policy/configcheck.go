package policy

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/egressd/egressd/allowlist"
)

// metadataAddrs are the cloud metadata and host-agent addresses an
// allow_private range must not reach by accident: AWS, GCP, Azure and
// OpenStack at 169.254.169.254, AWS's IPv6 endpoint, Azure's WireServer.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("168.63.129.16"),
}

// CheckConfig finds, without serving, what serve would refuse at start in a
// loaded config (a manifest that does not load; two integrations with one
// id, one manifest file or one listener) and what deserves a warning (an
// allow_private range wider than a dev exemption). Each line names the
// integration by its manifest path. check --config prints them.
func CheckConfig(cfg Config) (errs, warns []string) {
	ids := map[string]string{}     // manifest id -> manifest path
	files := map[string]string{}   // manifest file, as located -> path
	listens := map[string]string{} // normalised listener -> path
	for _, in := range cfg.Integrations {
		at := in.Manifest
		m, file, ps, err := allowlist.Load(in.Manifest, &cfg.Rules)
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("%s: %v", at, err))
		case m == nil:
			for _, p := range ps.Errors() {
				errs = append(errs, fmt.Sprintf("%s: %s", at, p))
			}
		default:
			if other, dup := ids[m.ID]; dup {
				errs = append(errs, fmt.Sprintf("%s: id %s is also served from %s; ids must be unique, and serve refuses the second", at, m.ID, other))
			} else {
				ids[m.ID] = at
			}
		}
		if file != "" {
			if other := sameFileAs(file, files); other != "" {
				errs = append(errs, fmt.Sprintf("%s: the same manifest file as %s", at, other))
			} else {
				files[file] = at
			}
		}
		if l, ok := listenKey(in.Listen); ok {
			if other, dup := listens[l]; dup {
				errs = append(errs, fmt.Sprintf("%s: listener %s is also %s's", at, in.Listen, other))
			} else {
				listens[l] = at
			}
		}
		for _, p := range in.Exemptions.AllowPrivate {
			if msg := allowPrivateWarning(p); msg != "" {
				warns = append(warns, at+": "+msg)
			}
		}
	}
	return errs, warns
}

// sameFileAs returns the path under which seen holds file, or "".
func sameFileAs(file string, seen map[string]string) string {
	st, err := os.Stat(file)
	if err != nil {
		return ""
	}
	for f, at := range seen {
		if o, err := os.Stat(f); err == nil && os.SameFile(st, o) {
			return at
		}
	}
	return ""
}

// listenKey normalises a listener so two spellings of one socket compare
// equal. Port 0 picks a free port each time, so it never collides.
func listenKey(s string) (string, bool) {
	if path, ok := strings.CutPrefix(s, "unix:"); ok {
		return "unix:" + filepath.Clean(path), true
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 {
		return "", false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String(), true
}

// allowPrivateWarning says why an allow_private range is more than a
// dev/test exemption: it reaches a metadata address, or it is not inside
// one denied range (so it spans several, or public space, where it means
// nothing but a mistake).
func allowPrivateWarning(p netip.Prefix) string {
	table := deniedV6
	if p.Addr().Is4() {
		table = deniedV4
	}
	inside := false
	for _, d := range table {
		inside = inside || (d.Bits() <= p.Bits() && d.Contains(p.Addr()))
	}
	if !inside {
		return fmt.Sprintf("allow_private %s is wider than a dev exemption: it is not inside one denied range, and lifts every denied range it covers, cloud metadata included; list the one range you test against", p)
	}
	for _, a := range metadataAddrs {
		if p.Contains(a) {
			return fmt.Sprintf("allow_private %s reaches the cloud metadata address %s; narrow it to the addresses you test against", p, a)
		}
	}
	return ""
}
