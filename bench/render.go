package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

func medianDur(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func medianF(fs []float64) float64 {
	if len(fs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), fs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// figure is one row of the table: a value per peer, and whether lower is
// better (for "best peer").
type figure struct {
	name   string
	lower  bool
	values map[string]float64
	unit   string
}

func render(peers []peer, res map[string]*peerResult, sz sizes, audit map[string]time.Duration, quick bool, took time.Duration) string {
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	figs := []figure{
		{name: "CONNECT+TLS+echo p50, c=1", lower: true, unit: "ms"},
		{name: "CONNECT+TLS+echo p99, c=1", lower: true, unit: "ms"},
		{name: "of which CONNECT phase p50", lower: true, unit: "ms"},
		{name: "CONNECT+TLS+echo p50, c=32", lower: true, unit: "ms"},
		{name: "CONNECT+TLS+echo p99, c=32", lower: true, unit: "ms"},
		{name: "connections/s, c=32", unit: "/s"},
		{name: "raw tunnel up", unit: "MB/s"},
		{name: "raw tunnel down", unit: "MB/s"},
		{name: "proxy CPU per connection", lower: true, unit: "µs"},
		{name: "of which in the kernel", lower: true, unit: "µs"},
		{name: "proxy CPU per GiB moved", lower: true, unit: "s"},
		{name: "idle tunnel memory", lower: true, unit: "KiB"},
	}
	for i := range figs {
		figs[i].values = map[string]float64{}
	}
	for _, p := range peers {
		r := res[p.name]
		v := []float64{ms(medianDur(r.p50c1)), ms(medianDur(r.p99c1)), ms(medianDur(r.connectPhase)), ms(medianDur(r.p50c32)), ms(medianDur(r.p99c32)),
			medianF(r.connsPerSec), medianF(r.upMBs), medianF(r.downMBs), float64(medianDur(r.cpuPerConn)) / 1e3, float64(medianDur(r.kernelPerConn)) / 1e3, medianF(r.cpuPerGiB), medianF(r.idleKiB)}
		for i := range figs {
			if p.direct() && i >= 8 || p.direct() && i == 2 {
				figs[i].values[p.name] = math.NaN()
				continue
			}
			figs[i].values[p.name] = v[i]
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# egressd beside its peers\n\n")
	fmt.Fprintf(&b, "Machine: %s. Loopback only. Measured %s, %d interleaved round(s), medians; took %s.\n\n", machine(), time.Now().UTC().Format("2006-01-02 15:04 MST"), sz.rounds, took.Round(time.Second))
	fmt.Fprintf(&b, "Command: `go run ./bench%s` (%d handshakes per concurrency, %d MiB per bulk transfer, %d idle tunnels).\n\n", map[bool]string{true: " --quick"}[quick], sz.handshakes, sz.bulk>>20, sz.idleTunnels)
	fmt.Fprintf(&b, "Each cell: value, then (× direct, × best peer). \"Best peer\" is the best proxy in the row, egressd included; direct and the bare relay are references, not peers.\n\n")
	fmt.Fprintf(&b, "| figure |")
	for _, p := range peers {
		fmt.Fprintf(&b, " %s |", p.name)
	}
	fmt.Fprintf(&b, "\n|---|%s\n", strings.Repeat("---|", len(peers)))
	for _, f := range figs {
		best := math.NaN()
		for _, p := range peers {
			v := f.values[p.name]
			if p.direct() || p.reference || math.IsNaN(v) {
				continue
			}
			if math.IsNaN(best) || (f.lower && v < best) || (!f.lower && v > best) {
				best = v
			}
		}
		fmt.Fprintf(&b, "| %s (%s) |", f.name, f.unit)
		direct := f.values["direct"]
		for _, p := range peers {
			v := f.values[p.name]
			switch {
			case math.IsNaN(v):
				fmt.Fprintf(&b, " — |")
			case p.direct():
				fmt.Fprintf(&b, " %s |", num(v))
			default:
				fmt.Fprintf(&b, " %s (%s, %s) |", num(v), ratio(v, direct), ratio(v, best))
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\negressd audit log cost, proxy CPU per connection at c=1: file %s, discarded (/dev/null) %s.\n\n", audit["file"], audit["discarded"])
	b.WriteString("Peers:\n\n")
	for _, p := range peers {
		fmt.Fprintf(&b, "- **%s**: %s\n", p.name, p.note)
	}
	return b.String()
}

func num(v float64) string {
	switch {
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
