package audit

import (
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Suppressor folds a flood of refusals into bounded summaries without
// losing a distinct finding. Refusals are grouped into classes (the same
// kind, integration, generation, decision, reason and listener); a target
// is what one refusal asked for (foldTarget: the host with its port when
// not 443, the SNI it fronted for, or the address it resolved to when that
// address was refused). Within one window of a class:
//
//   - each of the first maxVerbatim distinct targets is written at once as
//     its own line;
//   - past that, targets are still written at once up to a budget per
//     group (see groupBudget): 8 per cloud metadata address, 4 per other
//     special address range (loopback, private, link-local, …), 1 per
//     registrable domain of a name, the SNI's for a fronting refusal (at
//     most maxNameGroups of them) and 1 for
//     other addresses. So an attempt at 169.254.169.254, however it is
//     reached, is never lost in a flood of other targets;
//   - everything else is counted, with a sample of maxSample targets.
//
// When the window ends one summary line carries "suppressed" (the events
// not written as their own line), "folded" (each listed target with its
// count), "unlisted" (the events whose target is not listed) and
// "unlisted_rules" (those counted per rule, so a report still counts each
// among the attempts at its manifest entry). The lines
// per class and window are bounded whatever the flood, and every event is
// accounted for: lines + the sum of suppressed = events.
type Suppressor struct {
	log    *Log
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	classes map[string]*foldWindow
	nat64   []netip.Prefix // the operator's NAT64 prefixes (SetNAT64)
}

// Bounds per class and window.
const (
	maxVerbatim   = 4  // distinct targets written as their own line
	maxNameGroups = 16 // registrable domains that may have a line past that
	maxSample     = 8  // further targets listed with counts in the summary
	maxRuleCounts = 64 // rules the unlisted events are counted under
	maxFolded     = 4096
)

// RuleCount is the number of a summary's unlisted events one rule decided.
type RuleCount struct {
	Rule  string `json:"rule"`
	Count int64  `json:"count"`
}

// FoldedTarget is one target in a summary line, with the number of its
// events the summary stands for.
type FoldedTarget struct {
	Target string `json:"target"`
	Count  int64  `json:"count"`
}

type foldWindow struct {
	proto      Event
	until      time.Time
	counts     map[string]int64 // listed targets: folded events per target
	order      []string         // listed targets, first seen first
	groups     map[string]int   // lines written per group this window
	lines      int              // targets written as their own line
	sampled    int              // targets listed that were not written
	nameGroups int
	folded     int64
	unlisted   int64
	// unlistedRules counts the unlisted events per rule, in ruleOrder.
	unlistedRules map[string]int64
	ruleOrder     []string
}

// NewSuppressor folds over window (one second is a good default).
func NewSuppressor(l *Log, window time.Duration) *Suppressor {
	return &Suppressor{log: l, window: window, now: time.Now, classes: map[string]*foldWindow{}}
}

// Write writes e at once, or folds it into its class's summary. A folded
// event is not lost: it is counted in the next summary line.
func (s *Suppressor) Write(e Event) error {
	now := s.now()
	key, target := foldClass(e), foldTarget(e)
	s.mu.Lock()
	w := s.classes[key]
	var summary *Event
	if w != nil && !now.Before(w.until) {
		summary = w.summary()
		w = nil
	}
	if w == nil {
		if len(s.classes) >= maxFolded {
			s.flushLocked(now, true)
		}
		w = &foldWindow{proto: e, until: now.Add(s.window), counts: map[string]int64{}, groups: map[string]int{}, unlistedRules: map[string]int64{}}
		s.classes[key] = w
	}
	write := w.admit(target, e, s.nat64)
	s.mu.Unlock()
	if summary != nil {
		s.log.Write(*summary)
	}
	if !write {
		return s.log.Err()
	}
	return s.log.Write(e)
}

// admit decides whether e is written as its own line (true) or folded.
func (w *foldWindow) admit(target string, e Event, nat64 []netip.Prefix) bool {
	if _, listed := w.counts[target]; listed {
		w.counts[target]++
		w.folded++
		return false
	}
	group, isName := foldGroup(target, eventSNI(e), e.Addr, e.Reason, nat64)
	budget := groupBudget(group, isName)
	if isName && w.groups[group] == 0 && w.nameGroups >= maxNameGroups {
		budget = 0
	}
	if w.lines < maxVerbatim || w.groups[group] < budget {
		w.lines++
		if isName && w.groups[group] == 0 {
			w.nameGroups++
		}
		w.groups[group]++
		w.counts[target] = 0
		w.order = append(w.order, target)
		return true
	}
	w.folded++
	if name, ok := strings.CutPrefix(group, "metadata:"); ok {
		// Past its budget a metadata address is still named: further
		// targets that reached it (other spellings, other names resolving
		// to it) are counted under the address itself (at most one entry
		// per metadata address), never in the unlisted remainder.
		key := name + " (other targets)"
		if _, listed := w.counts[key]; !listed {
			w.order = append(w.order, key)
		}
		w.counts[key]++
		return false
	}
	if w.sampled < maxSample {
		w.sampled++
		w.counts[target] = 1
		w.order = append(w.order, target)
	} else {
		w.unlisted++
		w.countUnlistedRule(e.Rule)
	}
	return false
}

// countUnlistedRule counts an unlisted event under the rule that decided
// it (the manifest entry that allowed the host, for a refusal after that):
// its target is lost, but a report still counts it among the attempts at
// that entry. The rules are the manifest's and the operator's, so they are
// few; past maxRuleCounts the event is counted in unlisted alone.
func (w *foldWindow) countUnlistedRule(rule string) {
	if rule == "" {
		return
	}
	rule = Cap(rule, maxField)
	if _, ok := w.unlistedRules[rule]; !ok {
		if len(w.ruleOrder) >= maxRuleCounts {
			return
		}
		w.ruleOrder = append(w.ruleOrder, rule)
	}
	w.unlistedRules[rule]++
}

// Flush writes the summaries of windows that have ended; all of them if
// force is set (at shutdown).
func (s *Suppressor) Flush(force bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushLocked(s.now(), force)
}

func (s *Suppressor) flushLocked(now time.Time, force bool) {
	for k, w := range s.classes {
		if !force && now.Before(w.until) {
			continue
		}
		if sum := w.summary(); sum != nil {
			s.log.Write(*sum)
		}
		delete(s.classes, k)
	}
}

// summary is the window's summary line, or nil when nothing was folded.
func (w *foldWindow) summary() *Event {
	if w.folded == 0 {
		return nil
	}
	e := w.proto
	e.SNIRaw = ""
	e.Time, e.Conn, e.HostRaw, e.Host, e.SNI, e.Addr, e.Port, e.Rule, e.Msg, e.CNAME, e.Method = time.Time{}, "", "", "", "", "", 0, "", "", nil, ""
	// A refused brokered request's own fields are its, not the summary's.
	e.Path, e.Status, e.Secrets, e.BytesUp, e.BytesDown, e.Err = "", 0, nil, 0, 0, ""
	e.Suppressed, e.Unlisted = w.folded, w.unlisted
	for _, t := range w.order {
		if n := w.counts[t]; n > 0 {
			e.Folded = append(e.Folded, FoldedTarget{Target: t, Count: n})
		}
	}
	for _, r := range w.ruleOrder {
		e.UnlistedRules = append(e.UnlistedRules, RuleCount{Rule: r, Count: w.unlistedRules[r]})
	}
	return &e
}

// SetNAT64 gives the operator's NAT64 prefixes (config nat64_prefixes), so
// an address inside one is grouped by the IPv4 address it reaches, as the
// policy judged it. Call it before the first Write.
func (s *Suppressor) SetNAT64(prefixes []netip.Prefix) {
	s.mu.Lock()
	s.nat64 = append([]netip.Prefix(nil), prefixes...)
	s.mu.Unlock()
}
