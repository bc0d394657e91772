package assembly

import (
	"context"
	"fmt"

	"github.com/kproxy/kproxy/leasewatch"
	"github.com/kproxy/kproxy/leasewatch/kafscale"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/routing"
)

// Etcd layouts a proxy can route from (Config.EtcdLayout).
const (
	LayoutKproxy   = "kproxy"   // kproxy's brokers (docs/etcd-layout.md); the default
	LayoutKafScale = "kafscale" // KafScale's brokers (docs/kafscale.md)
)

// Where fetches go (Config.FetchFrom); the readiness answer reports the
// same values.
const (
	FetchZone  = adminapi.FetchZone  // a broker of the client's zone (routing.RouteRead)
	FetchOwner = adminapi.FetchOwner // the partition's owner
)

// setFetchFrom applies cfg.FetchFrom to routes.
func setFetchFrom(cfg Config, routes *routing.Table) error {
	kafscaleLayout := cfg.EtcdLayout == LayoutKafScale
	if cfg.AcquireInZone && kafscaleLayout {
		return fmt.Errorf("acquire-in-zone with etcd layout %q: a KafScale partition's reads must go where its first write goes", LayoutKafScale)
	}
	routes.SetAcquireInZone(cfg.AcquireInZone)
	switch cfg.FetchFrom {
	case "":
		routes.SetZoneReads(!kafscaleLayout)
	case FetchZone:
		if kafscaleLayout {
			return fmt.Errorf("fetch-from %q with etcd layout %q: KafScale's brokers serve stale copies of partitions they do not own", FetchZone, LayoutKafScale)
		}
		routes.SetZoneReads(true)
	case FetchOwner:
		routes.SetZoneReads(false)
	default:
		return fmt.Errorf("fetch-from %q: want %q or %q", cfg.FetchFrom, FetchZone, FetchOwner)
	}
	return nil
}

// routingSource keeps the routing table current from etcd; the proxy needs
// nothing else of it, whichever layout it reads.
type routingSource interface {
	Run(ctx context.Context) error // until ctx ends
	Synced() <-chan struct{}       // closed once the first listing is in the table
	Status() leasewatch.Status     // how current the table is
}

var (
	_ routingSource = (*leasewatch.Watcher)(nil)
	_ routingSource = (*kafscale.Source)(nil)
)

// newSource returns the source for cfg.EtcdLayout, feeding routes.
func newSource(cfg Config, routes *routing.Table) (routingSource, error) {
	if err := setFetchFrom(cfg, routes); err != nil {
		return nil, err
	}
	switch cfg.EtcdLayout {
	case "", LayoutKproxy:
		return leasewatch.New(leasewatch.Config{
			Client: cfg.Etcd, Layout: cfg.Layout, Table: routes,
			Logger: cfg.Logger.With("component", "leasewatch"), Registerer: cfg.Registry,
		})
	case LayoutKafScale:
		// KafScale's brokers answer reads of partitions they do not own
		// from a stale copy, instead of refusing them: owned partitions
		// must never be sent elsewhere.
		routes.SetOwnerOnly(true)
		return kafscale.New(kafscale.Config{
			Client: cfg.Etcd, Prefix: cfg.Layout.Prefix(), Table: routes,
			Logger: cfg.Logger.With("component", "kafscale-watch"), Registerer: cfg.Registry,
		})
	}
	return nil, fmt.Errorf("etcd layout %q: want %q or %q", cfg.EtcdLayout, LayoutKproxy, LayoutKafScale)
}
