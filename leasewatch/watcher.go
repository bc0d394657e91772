// Package leasewatch feeds the proxy's routing table from etcd: a Watcher
// mirrors layout's meta prefix (with package mirror: list, then watch from
// the next revision, re-list on compaction), decodes each key with
// layout.Decode and applies it to a routing.Table. While etcd is unreachable
// the table keeps its last contents and Status says how old they are.
//
// Its limit: it is best effort, a watch round trip behind etcd; brokers'
// fenced commits, not this view, keep writes safe.
package leasewatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/leasewatch/mirror"
	"github.com/kproxy/kproxy/routing"
)

// Config configures a Watcher. Client, Table are required.
type Config struct {
	Client     *clientv3.Client
	Layout     layout.Layout
	Table      *routing.Table
	Logger     *slog.Logger          // nil: discard
	Registerer prometheus.Registerer // nil: metrics are not registered
	Now        func() time.Time      // nil: time.Now
	// Optional tuning, passed to mirror.Sync (zero: its defaults).
	ProgressInterval       time.Duration
	MinBackoff, MaxBackoff time.Duration
}

// Watcher keeps a routing.Table equal to the meta prefix in etcd. While etcd
// is unreachable the table keeps its last known contents, and Status shows
// how old they are.
type Watcher struct {
	cfg     Config
	created time.Time

	synced     chan struct{}
	syncedOnce sync.Once
	ever       atomic.Bool
	revision   atomic.Int64
	lastSync   atomic.Int64 // unix nanoseconds of the last Synced
	connected  atomic.Bool

	events  *prometheus.CounterVec
	bad     *prometheus.CounterVec
	resyncs *prometheus.CounterVec
}

// Status says how current the table is.
type Status struct {
	Synced    bool          `json:"synced"`    // the first full listing was applied
	Revision  int64         `json:"revision"`  // etcd revision the table is complete up to
	LastSync  time.Time     `json:"last_sync"` // when etcd last confirmed that revision
	Age       time.Duration `json:"age"`       // time since LastSync (since New before the first sync)
	Connected bool          `json:"connected"` // the watch is established
	// MissingBrokers are brokers that own partitions or groups but are
	// not in the broker list (so their partitions have no route). The
	// native layout puts both under one lease, so it never has any.
	MissingBrokers []int32 `json:"missing_brokers,omitempty"`
}

// New returns a Watcher and registers its metrics.
func New(cfg Config) (*Watcher, error) {
	if cfg.Client == nil || cfg.Table == nil {
		return nil, errors.New("leasewatch: Config needs Client and Table")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Layout.Prefix() == "" {
		cfg.Layout = layout.New("")
	}
	w := &Watcher{cfg: cfg, created: cfg.Now(), synced: make(chan struct{})}
	if err := w.registerMetrics(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *Watcher) registerMetrics() error {
	w.events = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kproxy_watch_events_total",
		Help: "etcd watch events applied to the routing table, by key kind.",
	}, []string{"kind"})
	w.bad = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kproxy_watch_bad_values_total",
		Help: "etcd values that could not be decoded and were skipped, by key kind.",
	}, []string{"kind"})
	w.resyncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kproxy_watch_resyncs_total",
		Help: "Times the etcd watch was dropped and restarted, by reason (compacted means a full re-list).",
	}, []string{"reason"})
	staleness := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kproxy_routes_staleness_seconds",
		Help: "Seconds since etcd last confirmed the routing table is current.",
	}, func() float64 { return w.Status().Age.Seconds() })
	size := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "kproxy_routes_partitions",
		Help: "Partitions with an owner in the routing table.",
	}, func() float64 { return float64(w.cfg.Table.Len()) })
	// Every kind and reason at 0 from the start, so that rates have a series.
	for k := layout.KindUnknown; k <= layout.KindCoordinatorEpoch; k++ {
		w.events.WithLabelValues(kindName(k))
		w.bad.WithLabelValues(kindName(k))
	}
	for _, r := range []string{mirror.ReasonCompacted, mirror.ReasonWatchClosed, mirror.ReasonCanceled, mirror.ReasonStalled, mirror.ReasonListFailed} {
		w.resyncs.WithLabelValues(r)
	}
	if w.cfg.Registerer == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{w.events, w.bad, w.resyncs, staleness, size} {
		if err := w.cfg.Registerer.Register(c); err != nil {
			return fmt.Errorf("register watch metrics: %w", err)
		}
	}
	return nil
}

// Run keeps the table current until ctx ends; it returns ctx.Err().
func (w *Watcher) Run(ctx context.Context) error {
	return mirror.Sync(ctx, mirror.SyncConfig{
		Client:           w.cfg.Client,
		Prefix:           w.cfg.Layout.MetaPrefix(),
		Handler:          &tableHandler{w: w, dec: decoder{layout: w.cfg.Layout, log: w.cfg.Logger, bad: w.bad}},
		Logger:           w.cfg.Logger,
		MinBackoff:       w.cfg.MinBackoff,
		MaxBackoff:       w.cfg.MaxBackoff,
		ProgressInterval: w.cfg.ProgressInterval,
		OnResync:         func(reason string) { w.resyncs.WithLabelValues(reason).Inc() },
		OnDisconnect:     func(error) { w.connected.Store(false) },
	})
}

// Synced is closed after the first full listing is in the table.
func (w *Watcher) Synced() <-chan struct{} { return w.synced }

// Status reports how current the table is.
func (w *Watcher) Status() Status {
	now := w.cfg.Now()
	s := Status{Synced: w.ever.Load(), Revision: w.revision.Load(), Connected: w.connected.Load()}
	since := w.created
	if s.Synced {
		s.LastSync = time.Unix(0, w.lastSync.Load())
		since = s.LastSync
	}
	s.Age = max(now.Sub(since), 0)
	return s
}

// tableHandler applies mirror.Sync's calls to the table.
type tableHandler struct {
	w   *Watcher
	dec decoder
}

func (h *tableHandler) Reset(kvs []*mvccpb.KeyValue, rev int64) {
	b := routing.NewBuilder()
	for _, kv := range kvs {
		h.dec.put(b, kv)
	}
	h.w.cfg.Table.Replace(b)
	h.w.cfg.Logger.Info("routing table loaded", "revision", rev, "keys", len(kvs),
		"owners", h.w.cfg.Table.Len(), "brokers", len(h.w.cfg.Table.Brokers()))
}

func (h *tableHandler) Put(kv *mvccpb.KeyValue) {
	kind := h.dec.put(h.w.cfg.Table, kv)
	h.w.events.WithLabelValues(kind).Inc()
}

func (h *tableHandler) Delete(kv *mvccpb.KeyValue) {
	kind := h.dec.delete(h.w.cfg.Table, kv)
	h.w.events.WithLabelValues(kind).Inc()
}

func (h *tableHandler) Synced(rev int64) {
	w := h.w
	w.revision.Store(rev)
	w.lastSync.Store(w.cfg.Now().UnixNano())
	w.connected.Store(true)
	w.ever.Store(true)
	w.syncedOnce.Do(func() { close(w.synced) })
}
