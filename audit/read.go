package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"time"
)

// Record is one audit line read back: the fields reports use.
type Record struct {
	Time               time.Time      `json:"time"`
	Event              string         `json:"event"`
	Integration        string         `json:"integration"`
	IntegrationVersion string         `json:"integration_version"`
	Claim              string         `json:"claim"`
	Generation         uint64         `json:"generation"`
	Decision           string         `json:"decision"`
	Reason             string         `json:"reason"`
	Host               string         `json:"host"`
	Port               uint16         `json:"port"`
	Rule               string         `json:"rule"`
	SNI                string         `json:"sni"`
	SNIRaw             string         `json:"sni_raw"` // escaped as written
	Addr               string         `json:"addr"`
	Exemption          string         `json:"exemption"`
	Conn               string         `json:"conn"`
	Req                uint64         `json:"req"`
	Method             string         `json:"method"`
	Path               string         `json:"path"`
	Status             int            `json:"status"`
	Secrets            []string       `json:"secrets"`
	BytesUp            int64          `json:"bytes_up"`
	BytesDown          int64          `json:"bytes_down"`
	HelloBytes         int64          `json:"hello_bytes"`
	HostRaw            string         `json:"host_raw"`
	Suppressed         int64          `json:"suppressed"`
	Folded             []FoldedTarget `json:"folded"`
	Unlisted           int64          `json:"unlisted"`
	UnlistedRules      []RuleCount    `json:"unlisted_rules"`
	Action             string         `json:"action"`
	Pending            string         `json:"pending"`
	Manifest           string         `json:"manifest"`
	Entries            []string       `json:"entries"`
	Msg                string         `json:"msg"`
	Err                string         `json:"error"`
}

// count is how many decisions a line stands for: one, or, for a summary
// line that folded repeats of an earlier line, the number it folded.
func (r Record) count() int64 {
	if r.Suppressed > 0 {
		return r.Suppressed
	}
	return 1
}

// unfold turns a summary line into one record per target it lists, each
// standing for that target's count, plus, for the events whose target is
// not listed, one per rule they were counted under (with that rule, so a
// report counts them among the attempts at its entry) and one for the
// rest: a report groups them by target like any other line.
func unfold(r Record) []Record {
	if r.Suppressed <= 0 || (len(r.Folded) == 0 && r.Unlisted == 0 && len(r.UnlistedRules) == 0) {
		return []Record{r}
	}
	var out []Record
	rest := r.Suppressed
	for _, f := range r.Folded {
		if f.Count <= 0 || f.Count > rest {
			continue
		}
		t := r
		t.Host, t.HostRaw, t.Suppressed, t.Folded, t.Unlisted, t.UnlistedRules = f.Target, "", f.Count, nil, 0, nil
		out = append(out, t)
		rest -= f.Count
	}
	for _, u := range r.UnlistedRules {
		if u.Count <= 0 || u.Count > rest {
			continue
		}
		t := r
		t.Host, t.HostRaw, t.Rule, t.Suppressed, t.Folded, t.Unlisted, t.UnlistedRules = UnlistedTargets, "", u.Rule, u.Count, nil, 0, nil
		out = append(out, t)
		rest -= u.Count
	}
	if rest > 0 {
		t := r
		t.Host, t.HostRaw, t.Suppressed, t.Folded, t.Unlisted, t.UnlistedRules = UnlistedTargets, "", rest, nil, 0, nil
		out = append(out, t)
	}
	return out
}

// UnlistedTargets stands, in a report, for the targets a summary line
// counted without listing them (a flood of distinct names past its sample).
const UnlistedTargets = "(other targets, counted, not listed)"

// sni is the server_name a refusal's hello sent when it was not the host:
// the host name, or as sent (escaped) when it was no host name.
func (r Record) sni() string {
	if r.SNI != "" {
		return r.SNI
	}
	return r.SNIRaw
}

// target is what a refusal asked for, named as folding names it (see
// targetOf), so a line and the repeats folded after it are one row: the
// canonical host, or as sent. An unfolded summary record's Host is the
// target already, with no port, SNI or address beside it.
func (r Record) target() string {
	if r.Host != "" {
		return targetOf(r.Host, r.Port, r.sni(), r.Reason, r.Addr)
	}
	return r.HostRaw
}

// Accounts says whether r accounts for a refusal of target by name: a
// line of its own for it, or a summary line whose folded sample lists it.
// A target only counted in a summary's "unlisted" is not accounted for by
// name; folding guarantees that for a handful of targets per class and
// second, and for special addresses whatever floods (see Suppressor).
func (r Record) Accounts(target string) bool {
	if r.Suppressed == 0 {
		return target != "" && (r.target() == target || r.HostRaw == target)
	}
	for _, f := range r.Folded {
		if f.Target == target && f.Count > 0 {
			return true
		}
	}
	return false
}

// ReadFiles reads every line of the files, in order. A line that is not
// JSON is an error naming the file and line: a report over a damaged log
// should not quietly leave things out (verify says how it was damaged).
func ReadFiles(files []string) ([]Record, error) {
	var out []Record
	for _, f := range files {
		fh, err := openLog(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for n := 1; sc.Scan(); n++ {
			var r Record
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				fh.Close()
				return nil, fmt.Errorf("%s:%d: not an audit line: %v", f, n, err)
			}
			out = append(out, r)
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// hostIsTheProblem are the reasons that say the host itself, or how it was
// asked for, cannot be fixed by listing it.
var hostIsTheProblem = map[string]bool{
	"ip_literal": true, "bad_request": true, "method_not_allowed": true, "private_address": true,
	"operator_denied": true, "port_not_allowed": true, "limit_exceeded": true, "audit_unavailable": true,
}

// ObservedHosts returns, per integration, the hosts its code asked for that
// a network permission decides: allowed, would_deny (audit mode),
// not_allowlisted, and those that got as far as DNS or the dial. Hosts
// refused for a reason listing cannot fix (a private address, an IP
// literal, an operator denial, a port) are left out, and so is every
// attempt of an unapproved claim (Claim): it is no id's own until the
// operator approves it, and suggesting it as the id's would widen the
// owner's list with the claimant's hosts.
func ObservedHosts(recs []Record) map[string][]string {
	seen := map[string]map[string]bool{}
	out := map[string][]string{}
	var all []Record
	for _, r := range recs {
		all = append(all, unfold(r)...)
	}
	for _, r := range all {
		if r.Event != string(Connect) || r.Host == "" || r.Host == UnlistedTargets || r.Claim != "" {
			continue // a claim's attempts are no id's: the report files them apart
		}
		r.Host = hostOf(r.Host) // a folded target's host
		if hostIsTheProblem[r.Reason] {
			continue
		}
		if seen[r.Integration] == nil {
			seen[r.Integration] = map[string]bool{}
		}
		if !seen[r.Integration][r.Host] {
			seen[r.Integration][r.Host] = true
			out[r.Integration] = append(out[r.Integration], r.Host)
		}
	}
	return out
}
