package upstream

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Error kinds, the values of the kind label of kproxy_upstream_errors_total.
const (
	kindDial      = "dial"
	kindHandshake = "handshake"
	kindWrite     = "write"
	kindRead      = "read"
	kindTimeout   = "timeout"
	kindProtocol  = "protocol"
	kindClosed    = "closed"
)

type metrics struct {
	conns     *prometheus.GaugeVec
	dedicated *prometheus.GaugeVec
	inflight  *prometheus.GaugeVec
	errors    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		conns: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kproxy_upstream_connections",
			Help: "Open connections to each broker (handshake done).",
		}, []string{"broker"}),
		dedicated: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kproxy_upstream_dedicated_connections",
			Help: "Dedicated connections to each broker (dialing or open) carrying long-held requests (long polls, JoinGroup, SyncGroup) of one client connection, for brokers that answer in order.",
		}, []string{"broker"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kproxy_upstream_inflight",
			Help: "Requests queued or awaiting a response, per broker.",
		}, []string{"broker"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kproxy_upstream_errors_total",
			Help: "Broker connection failures by kind (dial, handshake, write, read, timeout, protocol, closed).",
		}, []string{"broker", "kind"}),
	}
	if reg != nil {
		m.conns = register(reg, m.conns)
		m.dedicated = register(reg, m.dedicated)
		m.inflight = register(reg, m.inflight)
		m.errors = register(reg, m.errors)
	}
	return m
}

// register registers c, or returns the collector already registered under
// the same name so that two pools may share one registry.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

// brokerMetrics are one broker's children, resolved once per broker pool.
type brokerMetrics struct {
	m         *metrics
	label     string
	conns     prometheus.Gauge
	dedicated prometheus.Gauge
	inflight  prometheus.Gauge
}

func (m *metrics) forBroker(id int32) *brokerMetrics {
	l := strconv.FormatInt(int64(id), 10)
	return &brokerMetrics{m: m, label: l, conns: m.conns.WithLabelValues(l), dedicated: m.dedicated.WithLabelValues(l), inflight: m.inflight.WithLabelValues(l)}
}

func (b *brokerMetrics) fail(kind string) { b.m.errors.WithLabelValues(b.label, kind).Inc() }
