// Package kafscale feeds a routing.Table from the etcd keys KafScale's
// brokers and operator write, so that kproxy can route in front of
// KafScale brokers as it does in front of its own: partition owners from
// partition-leases/<topic>/<p>, group coordinators from
// group-leases/<group> (values: the owner's broker id as a decimal string),
// and brokers, topics, topic ids and partition counts from the JSON
// metadata/snapshot.
//
// It lists and watches only the key range those three sit in (see
// keys.watchRange), not the whole prefix: KafScale's brokers write a
// next_offset key after every segment flush, hundreds a second, which
// every proxy replica would otherwise receive and drop.
//
// It promises what the native leasewatch.Watcher promises (it runs on the
// same internal/etcdmirror.Sync loop): a listing then a watch from the next
// revision, a re-list after compaction, the last known table kept while
// etcd is away, and its age in Status and metrics. Leader epochs, which
// KafScale does not keep, are derived from lease key revisions (see
// epochOf). Its limit: brokers are known only from the snapshot, which can
// lag the running brokers; an owner missing from it is reported in Status
// (MissingBrokers), the logs and a metric, and with the table's owner-only
// routing its partitions get a retriable error instead of another broker.
package kafscale

import (
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdmirror"
	"github.com/kproxy/kproxy/leasewatch"
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
	// Optional tuning, passed to etcdmirror.Sync (zero: its defaults).
	ProgressInterval       time.Duration
	MinBackoff, MaxBackoff time.Duration
	// MissingLogInterval spaces the warnings about owners missing from the
	// snapshot (default 10s); the metric and Status are always current.
	MissingLogInterval time.Duration
}

// Source keeps a routing.Table equal to KafScale's keys in etcd.
type Source struct {
	*leasewatch.Feeder // Run, Synced, Status (in the native watcher's shape)
	cfg                Config
	keys               keys
	h                  *leasewatch.Health // status and metrics, as the native Watcher's
}

// New returns a Source and registers its metrics (the native watcher's).
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
	h := leasewatch.NewHealth(cfg.Registerer, cfg.Now, cfg.Table)
	// Every kind at 0 from the start, so that rates have a series.
	for k := kindOther; k <= kindSnapshot; k++ {
		h.Events.WithLabelValues(k.String())
		h.Bad.WithLabelValues(k.String())
	}
	s := &Source{cfg: cfg, keys: newKeys(cfg.Prefix), h: h}
	start, end := s.keys.watchRange()
	s.Feeder = leasewatch.NewFeeder(leasewatch.FeederConfig{
		Client: cfg.Client, Prefix: start, End: end, Health: h, Logger: cfg.Logger,
		NewHandler:       func() etcdmirror.Handler { return newHandler(s) },
		ProgressInterval: cfg.ProgressInterval, MinBackoff: cfg.MinBackoff, MaxBackoff: cfg.MaxBackoff,
	})
	return s, nil
}
