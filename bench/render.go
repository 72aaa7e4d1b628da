package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

func render(peers []peer, res map[string]samples, cfg config, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# egressd beside its peers\n\n")
	fmt.Fprintf(&b, "Machine: %s. Loopback only. Measured %s, %d interleaved round(s), medians; took %s.\n\n", machine(), time.Now().UTC().Format("2006-01-02 15:04 MST"), cfg.rounds, took.Round(time.Second))
	fmt.Fprintf(&b, "Command: `go run ./bench%s` (%d handshakes at c=1, %d connections at c=32, %d MiB per bulk transfer, %d idle tunnels).\n\n", cfg.args(), cfg.handshakes, cfg.conns, cfg.bulk>>20, cfg.idleTunnels)
	fmt.Fprintf(&b, "Each cell: median, ± its spread over the rounds ((max−min)/median; **unreliable** past %.0f%%), then (× direct, × best peer). \"Best peer\" is the best proxy in the row, egressd included; direct and the bare relay are references, not peers. ", unreliableSpread*100)
	fmt.Fprintf(&b, "CPU per connection is the proxy process's utime+stime from /proc/PID/stat (every thread, exited ones included) over the %d connections at c=32, so a 10 ms tick is at most %.1f µs of it.\n\n", cfg.conns, 1e4/float64(cfg.conns))
	fmt.Fprintf(&b, "| figure |")
	for _, p := range peers {
		fmt.Fprintf(&b, " %s |", p.name)
	}
	fmt.Fprintf(&b, "\n|---|%s\n", strings.Repeat("---|", len(peers)))
	for _, f := range rows {
		if !selected(cfg.groups, f.group) {
			continue
		}
		best := math.NaN()
		for _, p := range peers {
			v := median(res[p.name][f.key])
			if p.direct() || p.reference || math.IsNaN(v) {
				continue
			}
			if math.IsNaN(best) || (f.lower && v < best) || (!f.lower && v > best) {
				best = v
			}
		}
		fmt.Fprintf(&b, "| %s (%s) |", f.name, f.unit)
		direct := median(res["direct"][f.key])
		for _, p := range peers {
			vs := res[p.name][f.key]
			v := median(vs)
			switch {
			case math.IsNaN(v):
				fmt.Fprintf(&b, " — |")
			case p.direct():
				fmt.Fprintf(&b, " %s |", cell(vs))
			default:
				fmt.Fprintf(&b, " %s (%s, %s) |", cell(vs), ratio(v, direct), ratio(v, best))
			}
		}
		b.WriteString("\n")
	}
	if a := res[auditPeer]; a != nil {
		file, null := a["file"], a["discarded"]
		fmt.Fprintf(&b, "\negressd audit log cost, proxy CPU per connection at c=32 over %d connections: file %s µs, discarded (/dev/null) %s µs: the file adds %s.\n", cfg.conns, cell(file), cell(null), percent(median(file)/median(null)-1))
	}
	b.WriteString(renderTargets(res, cfg.rounds))
	b.WriteString("\nPeers:\n\n")
	for _, p := range peers {
		fmt.Fprintf(&b, "- **%s**: %s\n", p.name, p.note)
	}
	return b.String()
}

// cell is a figure's median and its spread over the rounds, marked
// unreliable past unreliableSpread.
func cell(vs []float64) string {
	s := num(median(vs))
	sp := spread(vs)
	switch {
	case len(vs) < 2 || math.IsNaN(sp):
		return s
	case sp > unreliableSpread:
		return fmt.Sprintf("%s ±%.0f%% **unreliable**", s, sp*100)
	}
	return fmt.Sprintf("%s ±%.0f%%", s, sp*100)
}

func percent(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "—"
	}
	return fmt.Sprintf("%+.1f%%", f*100)
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func ratio(v, base float64) string {
	if math.IsNaN(base) || base == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", v/base)
}
