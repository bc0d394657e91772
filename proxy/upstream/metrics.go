package upstream

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/internal/promreg"
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
	requests  *prometheus.CounterVec
	errors    *prometheus.CounterVec
	serial    *prometheus.GaugeVec
	connWait  *prometheus.HistogramVec
	barriers  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		conns: promreg.GaugeVec(reg, prometheus.GaugeOpts{
			Name: "kproxy_upstream_connections",
			Help: "Open connections to each broker (handshake done).",
		}, []string{"broker"}),
		dedicated: promreg.GaugeVec(reg, prometheus.GaugeOpts{
			Name: "kproxy_upstream_dedicated_connections",
			Help: "Dedicated connections to each broker (dialing or open) carrying long-held requests (long polls, JoinGroup, SyncGroup) of one client connection, for brokers that answer in order.",
		}, []string{"broker"}),
		inflight: promreg.GaugeVec(reg, prometheus.GaugeOpts{
			Name: "kproxy_upstream_inflight",
			Help: "Requests queued or awaiting a response, per broker.",
		}, []string{"broker"}),
		requests: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_upstream_requests_total",
			Help: "Requests queued for sending to each broker.",
		}, []string{"broker"}),
		errors: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_upstream_errors_total",
			Help: "Broker connection failures by kind (dial, handshake, write, read, timeout, protocol, closed).",
		}, []string{"broker", "kind"}),
		serial: promreg.GaugeVec(reg, prometheus.GaugeOpts{
			Name: "kproxy_upstream_on_demand_connections",
			Help: "On-demand connections to each broker that answers in order (one per client connection with requests outstanding), by state: busy (dialing or carrying requests) or idle.",
		}, []string{"broker", "state"}),
		connWait: promreg.HistogramVec(reg, prometheus.HistogramOpts{
			Name:    "kproxy_upstream_connection_wait_seconds",
			Help:    "How long requests to a broker that answers in order waited for an on-demand connection (near 0 unless the limit was reached).",
			Buckets: prometheus.ExponentialBuckets(50e-6, 4, 10),
		}, []string{"broker"}),
		barriers: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_upstream_barriers_total",
			Help: "ApiVersions requests sent to a broker that answers in order behind acks=0 produces, whose answer shows the produces processed, so the client connection's next request may go out on another connection.",
		}, []string{"broker"}),
	}
	return m
}

// brokerMetrics are one broker's children, resolved once per broker pool.
type brokerMetrics struct {
	m         *metrics
	label     string
	conns     prometheus.Gauge
	dedicated prometheus.Gauge
	inflight  prometheus.Gauge
	requests  prometheus.Counter
	// serialBusy and serialIdle count on-demand connections by state.
	serialBusy prometheus.Gauge
	serialIdle prometheus.Gauge
	connWait   prometheus.Observer
	barriers   prometheus.Counter
}

// errorKinds are the kind label values, created at 0 for each broker.
var errorKinds = []string{kindDial, kindHandshake, kindWrite, kindRead, kindTimeout, kindProtocol, kindClosed}

func (m *metrics) forBroker(id int32) *brokerMetrics {
	l := strconv.FormatInt(int64(id), 10)
	for _, kind := range errorKinds {
		m.errors.WithLabelValues(l, kind)
	}
	return &brokerMetrics{m: m, label: l, conns: m.conns.WithLabelValues(l), dedicated: m.dedicated.WithLabelValues(l), inflight: m.inflight.WithLabelValues(l), requests: m.requests.WithLabelValues(l),
		serialBusy: m.serial.WithLabelValues(l, "busy"), serialIdle: m.serial.WithLabelValues(l, "idle"), connWait: m.connWait.WithLabelValues(l),
		barriers: m.barriers.WithLabelValues(l)}
}

func (b *brokerMetrics) fail(kind string) { b.m.errors.WithLabelValues(b.label, kind).Inc() }
