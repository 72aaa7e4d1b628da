package policy

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/egressd/egressd/internal/workdir"
)

// sharedListeners refuses two integrations on one listener address. A
// listener's address is who the integration is to its program: the second
// entry would either unlink the first one's socket and take its clients,
// or fail to bind after the first was judged fine. LoadConfig runs it
// after expanding manifests: folders, so "egressd check --config", the
// start of "egressd serve" and every reload judge the same expanded list:
// at start serve refuses to start, on reload the last good config stays.
// labels name each integration as the config file does.
func sharedListeners(ins []Integration, labels []string, ps *problems) {
	first := map[string]int{} // listener key -> index of its first entry
	for i, in := range ins {
		key, ok := listenerKey(in.Listen)
		if !ok {
			continue
		}
		j, taken := first[key]
		if !taken {
			first[key] = i
			continue
		}
		spelled := in.Listen
		if spelled != key {
			spelled += " (" + key + ")"
		}
		ps.add(labels[i]+".listen", fmt.Sprintf("%s is already the listener of %s (%s); two integrations cannot share one listener: give each its own address", spelled, labels[j], ins[j].Manifest))
	}
}

// listenerKey normalises a listener so two spellings of one address compare
// equal: a unix socket by its cleaned absolute path, a TCP listener by its
// address (IPv4-mapped IPv6 unmapped) and port. Port 0 picks a free port
// each time, so it never collides; ok is false for it and for what does
// not parse (ListenProblem reports that).
func listenerKey(s string) (key string, ok bool) {
	if path, isUnix := strings.CutPrefix(s, "unix:"); isUnix {
		abs, err := workdir.Abs(path)
		if err != nil {
			return "", false
		}
		return "unix:" + abs, true
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 {
		return "", false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String(), true
}
