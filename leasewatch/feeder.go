package leasewatch

import (
	"context"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdmirror"
)

// FeederConfig is what a routing source passes to its Feeder. Client,
// Prefix, Health and NewHandler are required.
type FeederConfig struct {
	Client *clientv3.Client
	Prefix string
	// End, if set, narrows the watch to the key range [Prefix, End) (see
	// etcdmirror.SyncConfig.End).
	End    string
	Health *Health
	// NewHandler returns the handler that applies one Run's events to the
	// table (a fresh one per Run, so no state outlives a stopped loop).
	NewHandler func() etcdmirror.Handler
	Logger     *slog.Logger
	// Optional tuning, passed to etcdmirror.Sync (zero: its defaults).
	ProgressInterval       time.Duration
	MinBackoff, MaxBackoff time.Duration
}

// Feeder is the shell every routing source shares (the native Watcher and
// the KafScale Source): it runs etcdmirror.Sync on the source's prefix
// with the source's handler, reports resyncs and outages to its Health,
// and offers Run, Synced and Status. A source embeds it; what the keys
// mean is the handler's.
type Feeder struct {
	cfg FeederConfig
}

// NewFeeder returns the shell for cfg.
func NewFeeder(cfg FeederConfig) *Feeder { return &Feeder{cfg: cfg} }

// Run keeps the table current until ctx ends; it returns ctx.Err().
func (f *Feeder) Run(ctx context.Context) error {
	return etcdmirror.Sync(ctx, etcdmirror.SyncConfig{
		Client:           f.cfg.Client,
		Prefix:           f.cfg.Prefix,
		End:              f.cfg.End,
		Handler:          f.cfg.NewHandler(),
		Logger:           f.cfg.Logger,
		MinBackoff:       f.cfg.MinBackoff,
		MaxBackoff:       f.cfg.MaxBackoff,
		ProgressInterval: f.cfg.ProgressInterval,
		OnResync:         f.cfg.Health.Resynced,
		OnDisconnect:     func(error) { f.cfg.Health.Disconnected() },
	})
}

// Synced is closed after the first full listing is in the table.
func (f *Feeder) Synced() <-chan struct{} { return f.cfg.Health.SyncedChan() }

// Status reports how current the table is.
func (f *Feeder) Status() Status { return f.cfg.Health.Status() }
