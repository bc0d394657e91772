// Package kafscale feeds a routing.Table from the etcd keys KafScale's
// brokers and operator write, so that kproxy can route in front of
// KafScale brokers as it does in front of its own: partition owners from
// partition-leases/<topic>/<p>, group coordinators from
// group-leases/<group> (values: the owner's broker id as a decimal string),
// and brokers, topics, topic ids and partition counts from the JSON
// metadata/snapshot.
//
// It promises what the native leasewatch.Watcher promises (it runs on the
// same leasewatch/mirror.Sync loop): a listing then a watch from the next
// revision, a re-list after compaction, the last known table kept while
// etcd is away, and its age in Status and metrics. Leader epochs, which
// KafScale does not keep, are derived from lease key revisions (see
// epochOf). Its limit: brokers are known only from the snapshot, which can
// lag the running brokers; an owner missing from it is reported in Status
// (MissingBrokers), the logs and a metric, and with the table's owner-only
// routing its partitions get a retriable error instead of another broker.
package kafscale

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/leasewatch"
	"github.com/kproxy/kproxy/leasewatch/mirror"
	"github.com/kproxy/kproxy/routing"
)

// DefaultPrefix is KafScale's etcd root.
const DefaultPrefix = "/kafscale"

// Config configures a Source. Client and Table are required.
type Config struct {
	Client     *clientv3.Client
	Prefix     string // "" means DefaultPrefix
	Table      *routing.Table
	Logger     *slog.Logger          // nil: discard
	Registerer prometheus.Registerer // nil: metrics are not registered
	Now        func() time.Time      // nil: time.Now
	// Optional tuning, passed to mirror.Sync (zero: its defaults).
	ProgressInterval       time.Duration
	MinBackoff, MaxBackoff time.Duration
	// MissingLogInterval spaces the warnings about owners missing from the
	// snapshot (default 10s); the metric and Status are always current.
	MissingLogInterval time.Duration
}

// Source keeps a routing.Table equal to KafScale's keys in etcd.
type Source struct {
	cfg     Config
	keys    keys
	created time.Time

	synced     chan struct{}
	syncedOnce sync.Once
	ever       atomic.Bool
	revision   atomic.Int64
	lastSync   atomic.Int64 // unix nanoseconds of the last Synced
	connected  atomic.Bool
	missing    atomic.Pointer[[]int32]

	m metrics
}

// New returns a Source and registers its metrics.
func New(cfg Config) (*Source, error) {
	if cfg.Client == nil || cfg.Table == nil {
		return nil, errors.New("kafscale: Config needs Client and Table")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MissingLogInterval <= 0 {
		cfg.MissingLogInterval = 10 * time.Second
	}
	s := &Source{cfg: cfg, keys: newKeys(cfg.Prefix), created: cfg.Now(), synced: make(chan struct{})}
	s.missing.Store(&[]int32{})
	m, err := newMetrics(cfg.Registerer, s)
	if err != nil {
		return nil, err
	}
	s.m = m
	return s, nil
}

// Run keeps the table current until ctx ends; it returns ctx.Err().
func (s *Source) Run(ctx context.Context) error {
	return mirror.Sync(ctx, mirror.SyncConfig{
		Client:           s.cfg.Client,
		Prefix:           s.keys.root,
		Handler:          newHandler(s),
		Logger:           s.cfg.Logger,
		MinBackoff:       s.cfg.MinBackoff,
		MaxBackoff:       s.cfg.MaxBackoff,
		ProgressInterval: s.cfg.ProgressInterval,
		OnResync:         func(reason string) { s.m.resyncs.WithLabelValues(reason).Inc() },
		OnDisconnect:     func(error) { s.connected.Store(false) },
	})
}

// Synced is closed after the first full listing is in the table.
func (s *Source) Synced() <-chan struct{} { return s.synced }

// Status reports how current the table is, in the native watcher's shape.
func (s *Source) Status() leasewatch.Status {
	st := leasewatch.Status{Synced: s.ever.Load(), Revision: s.revision.Load(), Connected: s.connected.Load()}
	since := s.created
	if st.Synced {
		st.LastSync = time.Unix(0, s.lastSync.Load())
		since = st.LastSync
	}
	st.Age = max(s.cfg.Now().Sub(since), 0)
	if m := *s.missing.Load(); len(m) > 0 {
		st.MissingBrokers = m
	}
	return st
}

// markSynced records that the table is complete up to rev.
func (s *Source) markSynced(rev int64) {
	s.revision.Store(rev)
	s.lastSync.Store(s.cfg.Now().UnixNano())
	s.connected.Store(true)
	s.ever.Store(true)
	s.syncedOnce.Do(func() { close(s.synced) })
}

// metrics keep the native watcher's names, so that dashboards and alerts
// work unchanged, plus the count of owners missing from the snapshot.
type metrics struct {
	events, bad, resyncs *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, s *Source) (metrics, error) {
	m := metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kproxy_watch_events_total",
			Help: "etcd watch events applied to the routing table, by key kind.",
		}, []string{"kind"}),
		bad: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kproxy_watch_bad_values_total",
			Help: "etcd values that could not be decoded and were skipped, by key kind.",
		}, []string{"kind"}),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kproxy_watch_resyncs_total",
			Help: "Times the etcd watch was dropped and restarted, by reason (compacted means a full re-list).",
		}, []string{"reason"}),
	}
	gauges := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kproxy_routes_staleness_seconds",
			Help: "Seconds since etcd last confirmed the routing table is current.",
		}, func() float64 { return s.Status().Age.Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kproxy_routes_partitions",
			Help: "Partitions with an owner in the routing table.",
		}, func() float64 { return float64(s.cfg.Table.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kproxy_routes_missing_brokers",
			Help: "Brokers that own partitions or groups but are missing from the broker list (their partitions have no route).",
		}, func() float64 { return float64(len(*s.missing.Load())) }),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range append([]prometheus.Collector{m.events, m.bad, m.resyncs}, gauges...) {
		if err := reg.Register(c); err != nil {
			return metrics{}, fmt.Errorf("register kafscale watch metrics: %w", err)
		}
	}
	return m, nil
}
