package leasewatch

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/internal/etcdmirror"
	"github.com/kproxy/kproxy/internal/promreg"
	"github.com/kproxy/kproxy/routing"
)

// Health is how current a routing source's table is: its Status and the
// metrics every source reports under the same names (the native Watcher
// and other etcd layouts' sources alike), so that /readyz, dashboards and
// alerts need no case per layout. A source calls Synced, Disconnected,
// Resynced and SetMissing from its mirror loop; anyone may read Status.
type Health struct {
	now     func() time.Time
	created time.Time

	synced     chan struct{}
	syncedOnce sync.Once
	ever       atomic.Bool
	revision   atomic.Int64
	lastSync   atomic.Int64 // unix nanoseconds of the last Synced
	connected  atomic.Bool
	missing    atomic.Pointer[[]int32]

	// Events counts every watch event received, applied or dropped, Bad
	// skipped values, both by key kind; Resyncs dropped watches, by reason.
	Events, Bad, Resyncs *prometheus.CounterVec
}

// NewHealth returns a Health whose clock is now, and registers its metrics
// on reg (nil: not registered) with promreg's policy: a second source on
// the same registry shares the counters, and the gauges stay the first
// source's. table gives the routed partition count.
func NewHealth(reg prometheus.Registerer, now func() time.Time, table *routing.Table) *Health {
	h := &Health{now: now, created: now(), synced: make(chan struct{})}
	h.missing.Store(&[]int32{})
	h.Events = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kproxy_watch_events_total",
		Help: "etcd watch events received, by key kind (other: keys routing does not use, dropped).",
	}, []string{"kind"})
	h.Bad = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kproxy_watch_bad_values_total",
		Help: "etcd values that could not be decoded and were skipped, by key kind.",
	}, []string{"kind"})
	h.Resyncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kproxy_watch_resyncs_total",
		Help: "Times the etcd watch was dropped and restarted, by reason (compacted means a full re-list).",
	}, []string{"reason"})
	if reg != nil {
		h.Events = promreg.Register(reg, h.Events)
		h.Bad = promreg.Register(reg, h.Bad)
		h.Resyncs = promreg.Register(reg, h.Resyncs)
		h.registerGauges(reg, table)
	}
	// Every reason at 0 from the start, so that rates have a series.
	for _, r := range []string{etcdmirror.ReasonCompacted, etcdmirror.ReasonWatchClosed, etcdmirror.ReasonCanceled, etcdmirror.ReasonStalled, etcdmirror.ReasonListFailed} {
		h.Resyncs.WithLabelValues(r)
	}
	return h
}

func (h *Health) registerGauges(reg prometheus.Registerer, table *routing.Table) {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kproxy_routes_staleness_seconds",
			Help: "Seconds since etcd last confirmed the routing table is current.",
		}, func() float64 { return h.Status().Age.Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kproxy_routes_partitions",
			Help: "Partitions with an owner in the routing table.",
		}, func() float64 { return float64(table.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kproxy_routes_missing_brokers",
			Help: "Brokers that own partitions or groups but are missing from the broker list (their partitions have no route).",
		}, func() float64 { return float64(len(*h.missing.Load())) }),
	} {
		promreg.Register(reg, c)
	}
}

// Synced records that the table is complete up to rev (mirror's Synced).
func (h *Health) Synced(rev int64) {
	h.revision.Store(rev)
	h.lastSync.Store(h.now().UnixNano())
	h.connected.Store(true)
	h.ever.Store(true)
	h.syncedOnce.Do(func() { close(h.synced) })
}

// Disconnected records that the watch broke (mirror's OnDisconnect).
func (h *Health) Disconnected() { h.connected.Store(false) }

// Resynced counts a dropped watch (mirror's OnResync).
func (h *Health) Resynced(reason string) { h.Resyncs.WithLabelValues(reason).Inc() }

// SetMissing records the brokers that own something but have no address,
// sorted; it reports whether the set changed.
func (h *Health) SetMissing(ids []int32) bool {
	if ids == nil {
		ids = []int32{}
	}
	old := *h.missing.Load()
	if len(old) == len(ids) {
		same := true
		for i := range ids {
			same = same && old[i] == ids[i]
		}
		if same {
			return false
		}
	}
	h.missing.Store(&ids)
	return true
}

// SyncedChan is closed after the first full listing is in the table.
func (h *Health) SyncedChan() <-chan struct{} { return h.synced }

// Status reports how current the table is.
func (h *Health) Status() Status {
	s := Status{Synced: h.ever.Load(), Revision: h.revision.Load(), Connected: h.connected.Load()}
	since := h.created
	if s.Synced {
		s.LastSync = time.Unix(0, h.lastSync.Load())
		since = s.LastSync
	}
	s.Age = max(h.now().Sub(since), 0)
	if m := *h.missing.Load(); len(m) > 0 {
		s.MissingBrokers = m
	}
	return s
}
