// Package leasewatch feeds the proxy's routing table from etcd: a Watcher
// mirrors layout's meta prefix (with internal/etcdmirror, through the
// Feeder shell it shares with leasewatch/kafscale: list, then watch from the
// next revision, re-list on compaction), decodes each key with
// layout.Decode and applies it to a routing.Table. While etcd is unreachable
// the table keeps its last contents and Status says how old they are.
//
// Its limit: it is best effort, a watch round trip behind etcd; brokers'
// fenced commits, not this view, keep writes safe.
package leasewatch

import (
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdmirror"
	"github.com/kproxy/kproxy/layout"
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
	// Optional tuning, passed to etcdmirror.Sync (zero: its defaults).
	ProgressInterval       time.Duration
	MinBackoff, MaxBackoff time.Duration
}

// Watcher keeps a routing.Table equal to the meta prefix in etcd. While etcd
// is unreachable the table keeps its last known contents, and Status shows
// how old they are.
type Watcher struct {
	*Feeder // Run, Synced, Status
	cfg     Config
	h       *Health
	// The Health's counters, under the names this package's tests use.
	events, bad, resyncs *prometheus.CounterVec
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
	h := NewHealth(cfg.Registerer, cfg.Now, cfg.Table)
	// Every kind at 0 from the start, so that rates have a series.
	for k := layout.KindUnknown; k <= layout.KindCoordinatorEpoch; k++ {
		h.Events.WithLabelValues(kindName(k))
		h.Bad.WithLabelValues(kindName(k))
	}
	w := &Watcher{cfg: cfg, h: h, events: h.Events, bad: h.Bad, resyncs: h.Resyncs}
	w.Feeder = NewFeeder(FeederConfig{
		Client: cfg.Client, Prefix: cfg.Layout.MetaPrefix(), Health: h, Logger: cfg.Logger,
		NewHandler: func() etcdmirror.Handler {
			return &tableHandler{w: w, dec: decoder{layout: w.cfg.Layout, log: w.cfg.Logger, bad: w.bad, events: w.events}}
		},
		ProgressInterval: cfg.ProgressInterval, MinBackoff: cfg.MinBackoff, MaxBackoff: cfg.MaxBackoff,
	})
	return w, nil
}

// tableHandler applies etcdmirror.Sync's calls to the table.
type tableHandler struct {
	w   *Watcher
	dec decoder
}

func (h *tableHandler) Reset(kvs []*mvccpb.KeyValue, rev int64) {
	b := routing.NewBuilder()
	load := h.dec
	load.events = nil // a load is not events
	for _, kv := range kvs {
		load.put(b, kv)
	}
	h.w.cfg.Table.Replace(b)
	h.w.cfg.Logger.Info("routing table loaded", "revision", rev, "keys", len(kvs),
		"owners", h.w.cfg.Table.Len(), "brokers", len(h.w.cfg.Table.Brokers()))
}

func (h *tableHandler) Put(kv *mvccpb.KeyValue) { h.dec.put(h.w.cfg.Table, kv) }

func (h *tableHandler) Delete(kv *mvccpb.KeyValue) { h.dec.delete(h.w.cfg.Table, kv) }

func (h *tableHandler) Synced(rev int64) { h.w.h.Synced(rev) }
