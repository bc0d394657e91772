package apis

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/promreg"
	"github.com/kproxy/kproxy/proxy/zone"
	"github.com/kproxy/kproxy/retry"
	"github.com/kproxy/kproxy/routing"
)

type metrics struct {
	retries *prometheus.CounterVec // api, reason
	splits  *prometheus.CounterVec // api, brokers
	early   prometheus.Counter
	// floorRaised: fetch answers whose high watermark was raised (hwfloor).
	floorRaised prometheus.Counter
	// up and reads are resolved once: they count on every sub-request.
	up                   map[int16]*[3]prometheus.Counter // by API key, then zone.Localities
	reads                [6][5]prometheus.Counter         // by routing.Read, then zone.Source
	upBytes, fetchRoutes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		retries: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_retries_total",
			Help: "Attempts the proxy repeated after a definite failure, by API and reason (Kafka error name, not_sent or transport).",
		}, []string{"api", "reason"}),
		splits: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_split_requests_total",
			Help: "Routed client requests by API and by how many brokers their first attempt went to (1: not split).",
		}, []string{"api", "brokers"}),
		early: promreg.Counter(reg, prometheus.CounterOpts{
			Name: "kproxy_fetch_early_returns_total",
			Help: "Split fetches answered before every broker replied, because enough bytes had arrived.",
		}),
		floorRaised: promreg.Counter(reg, prometheus.CounterOpts{
			Name: "kproxy_fetch_watermark_raised_total",
			Help: "Fetch partitions (zone reads) whose high watermark was raised to the highest one the proxy had passed on, because the broker that answered trails the owner's commits.",
		}),
	}
	upBytes := promreg.CounterVec(reg, prometheus.CounterOpts{
		Name: "kproxy_upstream_bytes_total",
		Help: "Bytes of requests sent to and answers read from brokers, by API and by whether the broker is in the client's zone (true, false, unknown: the client's or the broker's zone is not known).",
	}, []string{"api", "zone_local"})
	routes := promreg.CounterVec(reg, prometheus.CounterOpts{
		Name: "kproxy_fetch_route_total",
		Help: "Fetch partitions routed, by where they went (zone: a broker of the client's zone that is not the owner; owner: the usual route) and why (for zone: where the client's zone came from).",
	}, []string{"to", "reason"})
	m.upBytes, m.fetchRoutes = upBytes, routes
	m.up = make(map[int16]*[3]prometheus.Counter)
	for _, key := range RoutedKeys() {
		var c [3]prometheus.Counter
		for i, l := range zone.Localities() {
			c[i] = upBytes.WithLabelValues(kmsg.NameForKey(key), l)
		}
		m.up[key] = &c
	}
	for _, r := range routing.ReadReasons() {
		for _, src := range zone.Sources() {
			to, why := "owner", r.String()
			if r.ToZone() {
				to, why = "zone", src.String()
			}
			if r.ToZone() && src == zone.None {
				continue // a zone read always has a zone: no such series
			}
			m.reads[r][src] = routes.WithLabelValues(to, why)
		}
	}
	m.zero()
	return m
}

// Read counts one fetch partition routed (split.Metrics).
func (m *metrics) Read(to routing.Read, src zone.Source) {
	if int(to) < len(m.reads) && int(src) < len(m.reads[to]) && m.reads[to][src] != nil {
		m.reads[to][src].Inc()
	}
}

// Upstream counts bytes to or from a broker (split.Metrics).
func (m *metrics) Upstream(key int16, local string, n int) {
	c := m.up[key]
	if c == nil || n <= 0 {
		return
	}
	i := 2
	switch local {
	case "true":
		i = 0
	case "false":
		i = 1
	}
	c[i].Add(float64(n))
}

// zero creates, at 0, every retries series the package can count: for each
// API it routes to brokers, each code retry.Classify retries for it (as its
// row says whether it is repeatable), not_sent,
// and transport where a lost answer is retried (reads). Dashboards and alerts
// then see a flat line instead of no data before the first retry.
func (m *metrics) zero() {
	for _, key := range RoutedKeys() {
		name := kmsg.NameForKey(key)
		rep := repeatable(key)
		for _, code := range retry.RetriedCodes() {
			if retry.Classify(code, rep) == retry.Definite {
				m.retries.WithLabelValues(name, reason(code, nil))
			}
		}
		m.retries.WithLabelValues(name, reason(0, retry.ErrNotSent))
		// A lost answer is retried where a maybe-processed attempt may be
		// repeated, as the split engine decides it.
		if retry.Classify(kerr.RequestTimedOut.Code, rep) == retry.Definite {
			m.retries.WithLabelValues(name, reason(0, errTransport))
		}
	}
}

// errTransport stands for any transport error that is not ErrNotSent.
var errTransport = errors.New("transport")

// ImplementedKeys lists every API key the proxy implements (answered
// locally or routed), in key order: the label values of per-API metrics that
// are known in advance.
func ImplementedKeys() []int16 { return keysWhere(func(k apiKind) bool { return k != kindNone }) }

// RoutedKeys lists the implemented API keys that go to brokers (and so can
// be retried), in key order.
func RoutedKeys() []int16 {
	return keysWhere(func(k apiKind) bool { return k != kindNone && k != kindLocal })
}

// AuthorizedKeys lists the API keys the authorizer is asked about (those
// with a rule or checked per partition), in key order: the label values of
// the authorizer's decision counts (authz.RecorderConfig.APIs).
func AuthorizedKeys() []int16 {
	var keys []int16
	for k := range apiTable {
		if m := apiTable[k].auth.mode; m == authRule || m == authPerPartition {
			keys = append(keys, int16(k))
		}
	}
	return keys
}

// repeatable is the split engine's and retry.Classify's view of the rows.
func repeatable(key int16) bool {
	return key >= 0 && int(key) < len(apiTable) && apiTable[key].repeatable
}

func keysWhere(ok func(apiKind) bool) []int16 {
	var keys []int16
	for k, spec := range apiTable {
		if ok(spec.kind) {
			keys = append(keys, int16(k))
		}
	}
	return keys
}

// brokerLabels avoids formatting the common broker counts.
var brokerLabels = [...]string{"0", "1", "2", "3", "4", "5", "6", "7", "8"}

// Split counts a request whose first round went to brokers brokers.
func (m *metrics) Split(key int16, brokers int) {
	label := ">8"
	if brokers < len(brokerLabels) {
		label = brokerLabels[brokers]
	}
	m.splits.WithLabelValues(kmsg.NameForKey(key), label).Inc()
}

// Retried counts one retry; reason is a Kafka error code or, when code is
// 0, a transport error.
func (m *metrics) Retried(key int16, code int16, err error) {
	m.retries.WithLabelValues(kmsg.NameForKey(key), reason(code, err)).Inc()
}

// Early counts a fetch answered before every broker did.
func (m *metrics) Early() { m.early.Inc() }

func reason(code int16, err error) string {
	if code != 0 {
		// Not errors.As: its target escapes, one allocation per retried
		// partition. Unknown codes are UNKNOWN_SERVER_ERROR, as before.
		return kerr.TypedErrorForCode(code).Message
	}
	if isNotSent(err) {
		return "not_sent"
	}
	return "transport"
}
