package proxy

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are egressd's Prometheus metrics. They are registered on the
// Registerer the caller passes, never on a global one: egressd runs one
// proxy per integration.
type Metrics struct {
	Decisions     *prometheus.CounterVec
	ActiveTunnels *prometheus.GaugeVec
	Bytes         *prometheus.CounterVec
	DNSLatency    prometheus.Histogram
	Reloads       *prometheus.CounterVec
	PreHandler    *prometheus.CounterVec
	Exemptions    *prometheus.GaugeVec
	AuditHealthy  prometheus.Gauge
}

// NewMetrics creates and registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_decisions_total", Help: "Connection decisions by integration, decision and reason code.",
		}, []string{"integration", "decision", "reason"}),
		ActiveTunnels: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "egressd_active_tunnels", Help: "Open tunnels by integration.",
		}, []string{"integration"}),
		Bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_tunnel_bytes_total", Help: "Bytes carried by closed tunnels, by integration and direction (up: to the origin).",
		}, []string{"integration", "direction"}),
		DNSLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "egressd_dns_query_seconds", Help: "Upstream DNS query latency.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		Reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_policy_loads_total", Help: "Policy loads by integration and result (loaded, unchanged, pending, kept_last_good, failed, removed).",
		}, []string{"integration", "result"}),
		PreHandler: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "egressd_connections_rejected_before_handler_total", Help: "Connections net/http closed before a complete request (malformed, oversized headers, too slow).",
		}, []string{"integration"}),
		Exemptions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "egressd_exemptions", Help: "Named exemptions in force (1), by integration and exemption; audit_mode is one.",
		}, []string{"integration", "exemption"}),
		AuditHealthy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "egressd_audit_healthy", Help: "1 while every audit line has been written, 0 after a write failure.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Decisions, m.ActiveTunnels, m.Bytes, m.DNSLatency, m.Reloads, m.PreHandler, m.Exemptions, m.AuditHealthy)
	}
	return m
}

// ObserveDNS records one upstream query; it fits Resolver.Observe.
func (m *Metrics) ObserveDNS(d time.Duration) { m.DNSLatency.Observe(d.Seconds()) }
