package main

import (
	"fmt"
	"math"
	"strings"
)

// A target is one of issue 16's goals for egressd's per-connection cost,
// judged round by round: each round measures egressd and the figure it is
// held to back to back, so their ratio (or difference) in one round moves
// far less with the neighbours' load than either figure across rounds.
type target struct {
	name string
	// margin is the round's value of the comparison, and ok whether the
	// target holds in that round; valid false when the round lacks a
	// figure (a peer or a row not run).
	margin func(res map[string]samples, round int) (v float64, ok, valid bool)
	unit   string // how margin prints: "×" for a ratio, else a unit
}

// at is the round's value of key for peer, or NaN.
func at(res map[string]samples, peer, key string, round int) float64 {
	vs := res[peer][key]
	if round >= len(vs) {
		return math.NaN()
	}
	return vs[round]
}

// ratioTarget holds egressd's key at most (or at least) bound times
// another peer's in the same round.
func ratioTarget(name, key, other string, bound float64, atMost bool) target {
	return target{name: name, unit: "×", margin: func(res map[string]samples, r int) (float64, bool, bool) {
		v := at(res, "egressd", key, r) / at(res, other, key, r)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return v, false, false
		}
		if atMost {
			return v, v <= bound, true
		}
		return v, v >= bound, true
	}}
}

var targets = []target{
	ratioTarget("proxy CPU per connection at c=32 ≤ squid's (egressd ÷ squid)", "cpuConn", "squid", 1, true),
	ratioTarget("connections/s at c=32 ≥ squid's (egressd ÷ squid)", "cps", "squid", 1, false),
	{name: "c=1 handshake overhead over direct ≤ squid's (egressd's overhead − squid's)", unit: "ms", margin: func(res map[string]samples, r int) (float64, bool, bool) {
		d := at(res, "direct", "p50c1", r)
		v := (at(res, "egressd", "p50c1", r) - d) - (at(res, "squid", "p50c1", r) - d)
		return v, v <= 0, !math.IsNaN(v)
	}},
	{name: "the audit file adds ≤ 5% to CPU per connection (file ÷ /dev/null)", unit: "×", margin: func(res map[string]samples, r int) (float64, bool, bool) {
		v := at(res, auditPeer, "file", r) / at(res, auditPeer, "discarded", r)
		return v, v <= 1.05, !math.IsNaN(v) && !math.IsInf(v, 0)
	}},
	ratioTarget("raw throughput up ≥ 0.95× the bare relay (egressd ÷ relay)", "up", "relay", 0.95, false),
	ratioTarget("raw throughput down ≥ 0.95× the bare relay (egressd ÷ relay)", "down", "relay", 0.95, false),
	{name: "idle tunnel ≤ 12 KiB", unit: "KiB", margin: func(res map[string]samples, r int) (float64, bool, bool) {
		v := at(res, "egressd", "idleKiB", r)
		return v, v <= 12, !math.IsNaN(v)
	}},
	ratioTarget("CONNECT phase p50 not above the baseline's (egressd ÷ --baseline)", "phase", "baseline", 1, true),
}

// renderTargets judges each target round by round: "met" when it holds in
// every round, "met in N of M rounds" when it holds in most but not all
// (the machine's noise decides it), and "not met" otherwise.
func renderTargets(res map[string]samples, rounds int) string {
	var b strings.Builder
	b.WriteString("\n### Issue 16's targets, round by round\n\n")
	b.WriteString("Each round measures egressd and what it is held to back to back; the comparison is made within the round, then over the rounds.\n\n")
	b.WriteString("| target | each round | median | verdict |\n|---|---|---|---|\n")
	for _, t := range targets {
		var vals []float64
		var each []string
		held := 0
		for r := 0; r < rounds; r++ {
			v, ok, valid := t.margin(res, r)
			if !valid {
				continue
			}
			vals = append(vals, v)
			each = append(each, num(v)+t.unit)
			if ok {
				held++
			}
		}
		if len(vals) == 0 {
			fmt.Fprintf(&b, "| %s | not measured in this run | — | — |\n", t.name)
			continue
		}
		m := median(vals)
		verdict := "not met"
		switch {
		case held == len(vals):
			verdict = "**met** in every round"
		case held*2 > len(vals):
			verdict = fmt.Sprintf("met in %d of %d rounds (noise decides it)", held, len(vals))
		case held > 0:
			verdict = fmt.Sprintf("not met (held in %d of %d rounds)", held, len(vals))
		}
		fmt.Fprintf(&b, "| %s | %s | %s%s | %s |\n", t.name, strings.Join(each, ", "), num(m), t.unit, verdict)
	}
	return b.String()
}
