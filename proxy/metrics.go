package proxy

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/internal/promreg"
	"github.com/kproxy/kproxy/proxy/apis"
)

// Values of the code label of kproxy_request_errors_total. The proxy does not
// decode response bodies, so these are the failures the proxy itself sees.
const (
	codeInvalidRequest = "INVALID_REQUEST"     // malformed, oversize or unknown request: connection closed
	codeUnsupported    = "UNSUPPORTED_VERSION" // ApiVersions of a version kmsg does not know
	codeDispatch       = "DISPATCH_FAILED"     // the dispatcher gave up: connection closed
)

type metrics struct {
	requests  *prometheus.CounterVec
	errors    *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	bytesIn   prometheus.Counter
	bytesOut  prometheus.Counter
	conns     prometheus.Gauge
	connTotal prometheus.Counter
	mutes     prometheus.Counter

	perAPI [maxKey + 2]atomic.Pointer[apiMetrics] // last entry: unknown keys
}

type apiMetrics struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// newMetrics makes the proxy's metrics; bufs is the frame pool whose free
// bytes it exports.
func newMetrics(reg prometheus.Registerer, bufs *kwire.BufPool) *metrics {
	m := &metrics{
		requests: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_requests_total", Help: "Client requests read, by API.",
		}, []string{"api"}),
		errors: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_request_errors_total",
			Help: "Client requests the proxy failed itself, by API and code (INVALID_REQUEST, UNSUPPORTED_VERSION, DISPATCH_FAILED).",
		}, []string{"api", "code"}),
		duration: promreg.HistogramVec(reg, prometheus.HistogramOpts{
			Name:    "kproxy_request_duration_seconds",
			Help:    "Time from reading a client request to having its response ready, by API.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14), // 100us .. ~15min
		}, []string{"api"}),
		bytesIn: promreg.Counter(reg, prometheus.CounterOpts{
			Name: "kproxy_bytes_in_total", Help: "Bytes read from clients, including frame headers.",
		}),
		bytesOut: promreg.Counter(reg, prometheus.CounterOpts{
			Name: "kproxy_bytes_out_total", Help: "Bytes written to clients, including frame headers.",
		}),
		conns: promreg.Gauge(reg, prometheus.GaugeOpts{
			Name: "kproxy_client_connections", Help: "Open client connections.",
		}),
		connTotal: promreg.Counter(reg, prometheus.CounterOpts{
			Name: "kproxy_client_connections_total", Help: "Client connections accepted.",
		}),
		mutes: promreg.Counter(reg, prometheus.CounterOpts{
			Name: "kproxy_client_mutes_total",
			Help: "Times a client connection's reads paused because its unsent answers exceeded max-unsent-bytes-per-connection.",
		}),
	}
	// Pooled memory is idle by definition: operators (and bench/scale)
	// subtract it from RSS to see what is live. Servers sharing a
	// registry share the first one's series.
	promreg.GaugeFunc(reg, prometheus.GaugeOpts{
		Name: "kproxy_buffer_pool_free_bytes",
		Help: "Bytes of frames kept on the frame pool's free lists for later requests, none of them in use.",
	}, func() float64 { return float64(bufs.FreeBytes()) })
	m.zero()
	return m
}

// zero creates every per-API request and error series at 0 for the APIs the
// proxy implements, so that rates and alerts have a series from the start.
func (m *metrics) zero() {
	for _, key := range apis.ImplementedKeys() {
		name := apiName(key)
		m.requests.WithLabelValues(name)
		for _, code := range []string{codeInvalidRequest, codeUnsupported, codeDispatch} {
			m.errors.WithLabelValues(name, code)
		}
	}
}

func apiName(key int16) string {
	if name := kmsg.NameForKey(key); name != "" {
		return name
	}
	return "Unknown"
}

// api returns key's children, resolving the labels once per key.
func (m *metrics) api(key int16) *apiMetrics {
	i := int(key)
	if key < 0 || key > maxKey {
		i = maxKey + 1
	}
	if a := m.perAPI[i].Load(); a != nil {
		return a
	}
	name := apiName(key)
	a := &apiMetrics{requests: m.requests.WithLabelValues(name), duration: m.duration.WithLabelValues(name)}
	m.perAPI[i].CompareAndSwap(nil, a)
	return m.perAPI[i].Load()
}

func (m *metrics) fail(key int16, code string) { m.errors.WithLabelValues(apiName(key), code).Inc() }
