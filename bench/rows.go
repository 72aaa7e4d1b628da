package main

import (
	"math"
	"sort"
	"strings"
)

// row is one figure of the table. Its group is what --rows selects: the
// figures measured together in one step of a round.
type row struct {
	key, name, unit string
	group           string
	lower           bool // lower is better
	proxyOnly       bool // no value for direct
}

// The groups of rows, in the order a round measures them.
const (
	groupC1    = "c1"    // latency at concurrency 1
	groupC32   = "c32"   // latency, rate and CPU per connection at concurrency 32
	groupBulk  = "bulk"  // raw tunnel throughput and CPU per GiB
	groupIdle  = "idle"  // idle tunnel memory
	groupAudit = "audit" // egressd's audit sink, file against /dev/null
)

var allGroups = []string{groupC1, groupC32, groupBulk, groupIdle, groupAudit}

var rows = []row{
	{key: "p50c1", name: "CONNECT+TLS+echo p50, c=1", unit: "ms", group: groupC1, lower: true},
	{key: "p99c1", name: "CONNECT+TLS+echo p99, c=1", unit: "ms", group: groupC1, lower: true},
	{key: "phase", name: "of which CONNECT phase p50", unit: "ms", group: groupC1, lower: true, proxyOnly: true},
	{key: "p50c32", name: "CONNECT+TLS+echo p50, c=32", unit: "ms", group: groupC32, lower: true},
	{key: "p99c32", name: "CONNECT+TLS+echo p99, c=32", unit: "ms", group: groupC32, lower: true},
	{key: "cps", name: "connections/s, c=32", unit: "/s", group: groupC32},
	{key: "cpuConn", name: "proxy CPU per connection, c=32", unit: "µs", group: groupC32, lower: true, proxyOnly: true},
	{key: "kernelConn", name: "of which in the kernel", unit: "µs", group: groupC32, lower: true, proxyOnly: true},
	{key: "up", name: "raw tunnel up", unit: "MB/s", group: groupBulk},
	{key: "down", name: "raw tunnel down", unit: "MB/s", group: groupBulk},
	{key: "cpuGiB", name: "proxy CPU per GiB moved", unit: "s", group: groupBulk, lower: true, proxyOnly: true},
	{key: "idleKiB", name: "idle tunnel memory", unit: "KiB", group: groupIdle, lower: true, proxyOnly: true},
}

// unreliableSpread is the spread over rounds past which a figure is marked
// unreliable: on a shared two-core machine a figure that moves more than
// this between rounds says more about the neighbours than the proxy.
const unreliableSpread = 0.20

// samples holds every round's value of every figure for one peer.
type samples map[string][]float64

func (s samples) add(key string, v float64) { s[key] = append(s[key], v) }

// median is the middle value of vs (NaN when there is none).
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// spread is (max-min)/median over the rounds: 0 with one round, NaN with
// none.
func spread(vs []float64) float64 {
	m := median(vs)
	if math.IsNaN(m) || m == 0 {
		return math.NaN()
	}
	lo, hi := vs[0], vs[0]
	for _, v := range vs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return (hi - lo) / m
}

// selected reports whether a comma-separated list names name; an empty
// list names everything.
func selected(list, name string) bool {
	return list == "" || strings.Contains(","+list+",", ","+name+",")
}
