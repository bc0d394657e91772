package broker

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/promreg"
	"github.com/kproxy/kproxy/refbroker/broker/pacer"
	"github.com/kproxy/kproxy/refbroker/broker/partlog"
)

// metrics are the broker's Prometheus series (kproxy_broker_*). With no
// registerer they are still counted, just not exported.
type metrics struct {
	requests     *prometheus.CounterVec
	produces     prometheus.Counter
	fetches      prometheus.Counter
	commits      prometheus.Counter
	commitFails  *prometheus.CounterVec
	commitTime   prometheus.Histogram
	acquisitions prometheus.Counter
	refused      *prometheus.CounterVec
	losses       prometheus.Counter
	sessionLoss  prometheus.Counter
	fetchBytes   *prometheus.CounterVec // rack_local
	cacheHit     prometheus.Counter     // segment cache lookups, by result
	cacheMiss    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_broker_requests_total", Help: "Requests received, by API.",
		}, []string{"api"}),
		produces: promreg.Counter(reg, prometheus.CounterOpts{
			Name: "kproxy_broker_produce_requests_total", Help: "Produce requests received.",
		}),
		fetches: promreg.Counter(reg, prometheus.CounterOpts{
			Name: "kproxy_broker_fetch_requests_total", Help: "Fetch requests received.",
		}),
		commits: promreg.Counter(reg, prometheus.CounterOpts{
			Name: "kproxy_broker_commits_total", Help: "Successful fenced partition commits.",
		}),
		commitFails: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_broker_commit_failures_total", Help: "Failed partition commits, by reason (fenced or other).",
		}, []string{"reason"}),
		commitTime: promreg.Histogram(reg, prometheus.HistogramOpts{
			Name: "kproxy_broker_commit_seconds", Help: "Latency of successful partition commits.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		acquisitions: promreg.Counter(reg, prometheus.CounterOpts{
			Name: "kproxy_broker_acquisitions_total", Help: "Partition ownerships acquired.",
		}),
		refused: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_broker_acquisitions_refused_total",
			Help: "First requests refused with a retriable code because every acquisition slot stayed taken for the wait, by kind (partition or group).",
		}, []string{"kind"}),
		losses: promreg.Counter(reg, prometheus.CounterOpts{
			Name: "kproxy_broker_losses_total", Help: "Partition or group ownerships lost without release.",
		}),
		sessionLoss: promreg.Counter(reg, prometheus.CounterOpts{
			Name: "kproxy_broker_session_losses_total", Help: "Lease session expiries (each loses every ownership it held).",
		}),
		fetchBytes: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_broker_fetch_bytes_total",
			Help: "Record bytes served to fetches, by whether the fetch's RackID (the client's client.rack) is this broker's rack (true, false, unknown: either is not set).",
		}, []string{"rack_local"}),
	}
	lookups := promreg.CounterVec(reg, prometheus.CounterOpts{
		Name: "kproxy_broker_segment_cache_lookups_total",
		Help: "Segment reads by whether the broker's segment cache held the object (hit) or the store was read (miss).",
	}, []string{"result"})
	for _, l := range []string{"true", "false", "unknown"} {
		m.fetchBytes.WithLabelValues(l)
	}
	m.cacheHit, m.cacheMiss = lookups.WithLabelValues("hit"), lookups.WithLabelValues("miss")
	for _, k := range []pacer.Kind{pacer.Partition, pacer.Group} { // exported at 0
		m.refused.WithLabelValues(k.String())
	}
	return m
}

func (m *metrics) request(key int16) { m.requests.WithLabelValues(kmsg.NameForKey(key)).Inc() }
func (m *metrics) produceRequest()   { m.produces.Inc() }
func (m *metrics) fetchRequest()     { m.fetches.Inc() }

// fetchServed counts an answer's record bytes by whether the client's rack
// (clientRack, from the request) is the broker's: a measure of cross-zone
// reads taken where the bytes leave, independent of any proxy's count.
func (m *metrics) fetchServed(clientRack, rack string, resp *kmsg.FetchResponse) {
	n := 0
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			n += len(p.RecordBatches)
		}
	}
	local := "unknown"
	if clientRack != "" && rack != "" {
		local = strconv.FormatBool(clientRack == rack)
	}
	m.fetchBytes.WithLabelValues(local).Add(float64(n))
}

// CacheLookup implements store.CacheObserver.
func (m *metrics) CacheLookup(hit bool) {
	if hit {
		m.cacheHit.Inc()
	} else {
		m.cacheMiss.Inc()
	}
}

func (m *metrics) loss(session bool, n int) {
	m.losses.Add(float64(n))
	if session {
		m.sessionLoss.Inc()
	}
}

// acquireRefused counts a Take the pacer refused.
func (m *metrics) acquireRefused(k pacer.Kind) { m.refused.WithLabelValues(k.String()).Inc() }

// Acquired implements partlog.Observer.
func (m *metrics) Acquired(partlog.TP) { m.acquisitions.Inc() }

// Committed implements partlog.Observer.
func (m *metrics) Committed(_ partlog.TP, took time.Duration) {
	m.commits.Inc()
	m.commitTime.Observe(took.Seconds())
}

// CommitFailed implements partlog.Observer.
func (m *metrics) CommitFailed(_ partlog.TP, fenced bool) {
	reason := "other"
	if fenced {
		reason = "fenced"
	}
	m.commitFails.WithLabelValues(reason).Inc()
}
