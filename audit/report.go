package audit

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Report answers a security reviewer's three questions per integration:
// what did it reach, what did it try that was refused, and does its
// manifest ask for more than it uses.
type Report struct {
	Generated time.Time `json:"generated"`
	Files     []string  `json:"files"`
	// Verification is the chain verdict over Files, taken before the
	// report: a report of a log that did not verify says so first.
	Verification *Verification       `json:"verification,omitempty"`
	Integrations []IntegrationReport `json:"integrations"`
	// Unattributed are the records naming no integration that are not
	// egressd's own lifecycle: shown, never dropped.
	Unattributed []Unattributed `json:"unattributed"`
}

// Verification is what Verify found, as a report carries it.
type Verification struct {
	Intact        bool   `json:"intact"`
	Problem       string `json:"problem,omitempty"`
	IntactThrough uint64 `json:"intact_through"`
	Lines         int    `json:"lines"`
	Proves        string `json:"proves"`
	// Unproven is Verdict.Unproven: why an intact log may still hold
	// lines or runs no egressd run of this log wrote.
	Unproven string `json:"unproven,omitempty"`
	// PrunedRuns and PrunedCrashed count the runs prune receipts in the
	// files removed, and those of them that had crashed: the headline
	// names them, so "intact" is never read as "every run is here".
	PrunedRuns    int `json:"pruned_runs,omitempty"`
	PrunedCrashed int `json:"pruned_crashed,omitempty"`
}

// VerificationOf is the part of a verdict a report carries.
func VerificationOf(v Verdict) *Verification {
	return &Verification{Intact: v.Intact, Problem: v.Problem, IntactThrough: v.IntactThrough, Lines: v.Lines, Proves: v.Proves, Unproven: v.Unproven(),
		PrunedRuns: len(v.PrunedChains), PrunedCrashed: PrunedCrashes(v)}
}

// Headline is the report's first line: that the log verified, or that it
// did not, why and where. A reviewer reads it before any finding.
func (v *Verification) Headline() string {
	switch {
	case v == nil:
		return "LOG NOT VERIFIED: the chain was not checked"
	case v.Intact && v.Unproven != "":
		// Intact line by line, but a run may have been planted, removed
		// or reordered whole, or an unkeyed chain rewritten (rounds 35
		// and 36: "intact" read with none of verify's caveats).
		return fmt.Sprintf("log verified: intact, %d lines through seq %d, but %s", v.Lines, v.IntactThrough, v.Unproven)
	case v.Intact && v.PrunedRuns > 0:
		return fmt.Sprintf("log verified: intact, %d lines through seq %d; %d earlier run(s) were removed with egressd audit prune, %d of them crashed (whatever those did after their last line is not in the log)", v.Lines, v.IntactThrough, v.PrunedRuns, v.PrunedCrashed)
	case v.Intact:
		return fmt.Sprintf("log verified: intact, %d lines through seq %d", v.Lines, v.IntactThrough)
	}
	return fmt.Sprintf("LOG NOT VERIFIED: BROKEN: %s (intact through seq %d, %d lines). What follows is read from a log that may have been edited, cut or added to: run egressd audit verify", v.Problem, v.IntactThrough, v.Lines)
}

// IntegrationReport is one integration's part of a Report.
type IntegrationReport struct {
	ID string `json:"id"`
	// Claim is the folder of an unapproved claim of ID: this section is
	// what that folder did while its claim waited, never the owner's.
	Claim    string    `json:"claim,omitempty"`
	Versions []string  `json:"versions"`
	Manifest string    `json:"manifest,omitempty"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	Reached  []HostUse `json:"reached"`
	// WouldDeny are hosts reached only because audit mode was on.
	WouldDeny []HostUse `json:"would_deny"`
	// ReachedThenRefused are tunnels refused after their allow line whose
	// bytes reached the origin before the refusal: the checked ClientHello
	// (forwarded before the rest of the handshake is checked), early data
	// behind it, or the origin's answer. They are
	// refusals (see Refused) and deliveries both, never "never connected".
	ReachedThenRefused []RefusedUse `json:"reached_then_refused"`
	// Declared are the manifest's entries; Unused those nothing ever asked
	// for (least-privilege findings: remove them); TriedNeverConnected those
	// that were asked for but never connected (every attempt failed: DNS, a
	// refused address, the dial), which is a problem to look into, not a
	// removal.
	Declared []string `json:"declared,omitempty"`
	// DeclaredFrom, when set, says Declared was read from a manifest file
	// at report time, not from the lists in force the log records: a
	// list that may never have been in force. Empty when the log's policy
	// events record the lists (every egressd that writes them does).
	DeclaredFrom        string       `json:"declared_from,omitempty"`
	Unused              []string     `json:"unused"`
	TriedNeverConnected []TriedEntry `json:"tried_never_connected"`
	Refused             []Refusal    `json:"refused"`
	Policy              []Change     `json:"policy"`
	Timeline            []Bucket     `json:"timeline"`
	// Secrets is where each brokered secret went (issue 15): per secret
	// and host, how many requests egressd added it to.
	Secrets []SecretUse `json:"secrets"`
}

// SecretUse counts the requests one secret was added to for one host. It
// names the secret, never its value.
type SecretUse struct {
	Secret   string `json:"secret"`
	Host     string `json:"host"`
	Requests int64  `json:"requests"`
}

// RefusedUse is the traffic of the tunnels to one host that reached the
// origin and were then refused for one reason.
type RefusedUse struct {
	Host        string `json:"host"`
	Rule        string `json:"rule,omitempty"`
	Reason      string `json:"reason"`
	Connections int64  `json:"connections"`
	// HelloOnly counts the connections of which only the checked
	// ClientHello reached the origin (the refusal came before anything
	// else went up, and nothing came down).
	HelloOnly int64 `json:"hello_only"`
	BytesUp   int64 `json:"bytes_up"`
	BytesDown int64 `json:"bytes_down"`
}

// TriedEntry is a declared entry that was asked for and never connected.
type TriedEntry struct {
	Entry    string           `json:"entry"`
	Attempts int64            `json:"attempts"`
	Reasons  map[string]int64 `json:"reasons"`
}

// HostUse is one host's traffic.
type HostUse struct {
	Host        string `json:"host"`
	Rule        string `json:"rule,omitempty"`
	Connections int64  `json:"connections"`
	BytesUp     int64  `json:"bytes_up"`
	BytesDown   int64  `json:"bytes_down"`
}

// Refusal groups refused attempts by kind, reason and host. Kind is
// "connect" (a connection) or "dns" (a query to the sandbox's DNS server,
// refused before any connection: an exfiltration name, a metadata name).
type Refusal struct {
	Kind   string    `json:"kind"`
	Reason string    `json:"reason"`
	Host   string    `json:"host,omitempty"`
	Count  int64     `json:"count"`
	First  time.Time `json:"first"`
	Last   time.Time `json:"last"`
}

// Change is one policy load or reload.
type Change struct {
	Time    time.Time `json:"time"`
	Version string    `json:"version,omitempty"`
	Action  string    `json:"action"`
	Pending string    `json:"pending,omitempty"`
	Error   string    `json:"error,omitempty"`
}

// Bucket counts connections in one slice of the report's time span.
type Bucket struct {
	Start   time.Time `json:"start"`
	Allowed int64     `json:"allowed"`
	Refused int64     `json:"refused"`
}

const timelineBuckets = 24

// BuildReport groups records by integration. declared maps an integration
// id to its manifest's entries (as written in canonical form); ids without
// one get no Unused finding.
func BuildReport(recs []Record, declared map[string][]string) Report {
	byID := map[string]*IntegrationReport{}
	get := func(id string) *IntegrationReport {
		ir := byID[id]
		if ir == nil {
			ir = &IntegrationReport{ID: id, Reached: []HostUse{}, WouldDeny: []HostUse{}, ReachedThenRefused: []RefusedUse{}, Unused: []string{}, TriedNeverConnected: []TriedEntry{}, Refused: []Refusal{}, Policy: []Change{}, Secrets: []SecretUse{}}
			byID[id] = ir
		}
		return ir
	}
	type key struct{ id, host string }
	reached := map[key]*HostUse{}
	would := map[key]*HostUse{}
	refused := map[[4]string]*Refusal{}
	refuse := func(r Record, kind string) {
		k := [4]string{r.Integration, kind, r.Reason, r.target()}
		f := refused[k]
		if f == nil {
			f = &Refusal{Kind: kind, Reason: r.Reason, Host: r.target(), First: r.Time}
			refused[k] = f
		}
		f.Count += r.count()
		if r.Time.After(f.Last) {
			f.Last = r.Time
		}
	}
	secrets := map[[3]string]*SecretUse{}  // integration, secret, host
	connHost := map[string]*HostUse{}      // conn id -> its host's usage, for close events
	refusedConn := map[string]RefusedUse{} // conn id -> a tunnel refused after its allow line
	reachedRefused := map[[4]string]*RefusedUse{}
	var failed []Record // refused attempts, to tell "tried" from "never tried"
	recs = bySection(recs)
	var all []Record
	for _, r := range recs {
		all = append(all, unfold(r)...)
	}
	for _, r := range all {
		if r.Integration == "" {
			continue
		}
		ir := get(r.Integration)
		if ir.First.IsZero() || r.Time.Before(ir.First) {
			ir.First = r.Time
		}
		if r.Time.After(ir.Last) {
			ir.Last = r.Time
		}
		if r.IntegrationVersion != "" && !contains(ir.Versions, r.IntegrationVersion) {
			ir.Versions = append(ir.Versions, r.IntegrationVersion)
		}
		switch r.Event {
		case string(Policy):
			if r.Manifest != "" {
				ir.Manifest = r.Manifest
			}
			ir.Policy = append(ir.Policy, Change{Time: r.Time, Version: r.IntegrationVersion, Action: r.Action, Pending: r.Pending, Error: r.Err})
		case string(Connect):
			n := r.count()
			switch r.Decision {
			case "allow", "would_deny":
				m := reached
				if r.Decision == "would_deny" {
					m = would
				}
				u := m[key{r.Integration, r.Host}]
				if u == nil {
					u = &HostUse{Host: r.Host, Rule: r.Rule}
					m[key{r.Integration, r.Host}] = u
				}
				u.Connections += n
				connHost[r.Conn] = u
			default:
				if u := connHost[r.Conn]; u != nil && r.Conn != "" {
					// Refused after its allow line (a second ClientHello
					// after a HelloRetryRequest): it did not reach the host.
					u.Connections--
					delete(connHost, r.Conn)
					refusedConn[r.Conn] = RefusedUse{Host: u.Host, Rule: u.Rule, Reason: r.Reason}
				}
				failed = append(failed, r)
				refuse(r, string(Connect))
			}
		case string(DNS):
			if r.Decision == "deny" {
				refuse(r, string(DNS))
			}
		case string(Request):
			if r.Decision == "deny" {
				refuse(r, string(Request))
				break
			}
			for _, name := range r.Secrets {
				k := [3]string{r.Integration, name, r.Host}
				if secrets[k] == nil {
					secrets[k] = &SecretUse{Secret: name, Host: r.Host}
				}
				secrets[k].Requests++
			}
		case string(Close):
			if u := connHost[r.Conn]; u != nil {
				u.BytesUp += r.BytesUp
				u.BytesDown += r.BytesDown
			}
			if ru, ok := refusedConn[r.Conn]; ok && r.Conn != "" {
				delete(refusedConn, r.Conn)
				if !r.reachedOrigin() {
					break
				}
				k := [4]string{r.Integration, ru.Host, ru.Rule, ru.Reason}
				if reachedRefused[k] == nil {
					reachedRefused[k] = &ru
				}
				reachedRefused[k].Connections++
				if r.helloOnly() {
					reachedRefused[k].HelloOnly++
				}
				reachedRefused[k].BytesUp += r.BytesUp
				reachedRefused[k].BytesDown += r.BytesDown
			}
		}
	}
	for k, u := range reached {
		if u.Connections > 0 {
			byID[k.id].Reached = append(byID[k.id].Reached, *u)
		}
	}
	for k, u := range would {
		if u.Connections > 0 {
			byID[k.id].WouldDeny = append(byID[k.id].WouldDeny, *u)
		}
	}
	for k, u := range reachedRefused {
		byID[k[0]].ReachedThenRefused = append(byID[k[0]].ReachedThenRefused, *u)
	}
	for k, f := range refused {
		byID[k[0]].Refused = append(byID[k[0]].Refused, *f)
	}
	for k, u := range secrets {
		byID[k[0]].Secrets = append(byID[k[0]].Secrets, *u)
	}
	rep := Report{Generated: time.Now().UTC(), Unattributed: unattributed(all)}
	for id, ir := range byID {
		sortUses(ir.Reached)
		sortUses(ir.WouldDeny)
		sort.Slice(ir.ReachedThenRefused, func(i, j int) bool {
			a, b := ir.ReachedThenRefused[i], ir.ReachedThenRefused[j]
			if a.Host != b.Host {
				return a.Host < b.Host
			}
			return a.Reason < b.Reason
		})
		sort.Slice(ir.Secrets, func(i, j int) bool {
			a, b := ir.Secrets[i], ir.Secrets[j]
			if a.Secret != b.Secret {
				return a.Secret < b.Secret
			}
			if a.Requests != b.Requests {
				return a.Requests > b.Requests
			}
			return a.Host < b.Host
		})
		sort.Slice(ir.Refused, func(i, j int) bool {
			a, b := ir.Refused[i], ir.Refused[j]
			if a.Kind != b.Kind {
				return a.Kind < b.Kind
			}
			if a.Reason != b.Reason {
				return a.Reason < b.Reason
			}
			return a.Host < b.Host
		})
		ir.ID, ir.Claim, _ = strings.Cut(id, claimSep)
		if entries, ok := declared[id]; ok && ir.Claim == "" {
			ir.Declared = entries
			used := map[string]bool{}
			for _, u := range ir.Reached {
				used[u.Rule] = true
			}
			for _, u := range ir.ReachedThenRefused {
				used[u.Rule] = true
			}
			for _, e := range entries {
				if used[e] {
					continue
				}
				if t := triedEntry(e, id, failed); t != nil {
					ir.TriedNeverConnected = append(ir.TriedNeverConnected, *t)
				} else {
					ir.Unused = append(ir.Unused, e)
				}
			}
		}
		ir.Timeline = timeline(recs, id, ir.First, ir.Last)
		rep.Integrations = append(rep.Integrations, *ir)
	}
	sort.Slice(rep.Integrations, func(i, j int) bool {
		a, b := rep.Integrations[i], rep.Integrations[j]
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return a.Claim < b.Claim
	})
	return rep
}

// ListsInForce returns, for each integration id whose policy events record
// the list in force (Event.Entries), every entry any of them put in force,
// in the order first seen. An entry is judged unused by what the log
// shows while it was in force, whatever the manifest says today. A
// claim's events are not the id's and are left out.
func ListsInForce(recs []Record) map[string][]string {
	out := map[string][]string{}
	for _, r := range recs {
		if r.Event != string(Policy) || r.Entries == nil || r.Claim != "" || r.Integration == "" {
			continue
		}
		list := out[r.Integration]
		if list == nil {
			list = []string{}
		}
		for _, e := range r.Entries {
			if !contains(list, e) {
				list = append(list, e)
			}
		}
		out[r.Integration] = list
	}
	return out
}

// claimSep joins an id and a claiming folder into one report section key.
const claimSep = "\x00claim\x00"

// bySection returns recs with each claim's records under a section key of
// their own (the id and the claiming folder), so nothing a claim did is
// counted as the owner's.
func bySection(recs []Record) []Record {
	out := make([]Record, len(recs))
	for i, r := range recs {
		if r.Claim != "" && r.Integration != "" {
			r.Integration += claimSep + r.Claim
		}
		out[i] = r
	}
	return out
}

// reachedOrigin says whether a close record shows bytes that reached the
// origin: anything went up (the ClientHello the allow covered is forwarded
// before the rest of the handshake is checked, and may carry up to 16 KiB
// the client chose, padding included) or anything came down.
func (r Record) reachedOrigin() bool {
	return r.BytesDown > 0 || r.BytesUp > 0
}

// helloOnly says whether what reached the origin was the checked
// ClientHello alone: nothing came down and no byte went up past it.
func (r Record) helloOnly() bool {
	return r.HelloBytes > 0 && r.BytesDown == 0 && r.BytesUp <= r.HelloBytes
}

// triedEntry gathers the refused attempts of integration id that asked for
// entry: those whose rule is the entry (DNS, dial and TLS failures carry
// it), or whose host the entry names (a refused address replaces the rule
// with the range that refused it). Nil when nothing asked for it.
func triedEntry(entry, id string, failed []Record) *TriedEntry {
	var t *TriedEntry
	for _, r := range failed {
		if r.Integration != id || (r.Rule != entry && !entryNames(entry, hostOf(r.Host))) {
			continue
		}
		if t == nil {
			t = &TriedEntry{Entry: entry, Reasons: map[string]int64{}}
		}
		t.Attempts += r.count()
		t.Reasons[r.Reason] += r.count()
	}
	return t
}

// entryNames reports whether a manifest entry as written ("host",
// "*.suffix", optionally with ":port") names host. It is for the report
// only: the policy's own matching decides what is allowed.
func entryNames(entry, host string) bool {
	if host == "" {
		return false
	}
	if i := strings.LastIndexByte(entry, ':'); i > 0 && !strings.Contains(entry[:i], ":") {
		entry = entry[:i]
	}
	if suffix, ok := strings.CutPrefix(entry, "*"); ok { // exactly one more label
		label, ok := strings.CutSuffix(host, suffix)
		return ok && label != "" && !strings.Contains(label, ".")
	}
	return entry == host
}

func timeline(recs []Record, id string, first, last time.Time) []Bucket {
	span := last.Sub(first)
	step := span / timelineBuckets
	if step <= 0 {
		step = time.Second
	}
	out := make([]Bucket, timelineBuckets)
	for i := range out {
		out[i].Start = first.Add(time.Duration(i) * step)
	}
	for _, r := range recs {
		if r.Integration != id || r.Event != string(Connect) {
			continue
		}
		i := int(r.Time.Sub(first) / step)
		if i >= timelineBuckets {
			i = timelineBuckets - 1
		}
		if r.Decision == "allow" || r.Decision == "would_deny" {
			out[i].Allowed += r.count()
		} else {
			out[i].Refused += r.count()
		}
	}
	return out
}

func sortUses(us []HostUse) {
	sort.Slice(us, func(i, j int) bool {
		if us[i].Connections != us[j].Connections {
			return us[i].Connections > us[j].Connections
		}
		return us[i].Host < us[j].Host
	})
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
