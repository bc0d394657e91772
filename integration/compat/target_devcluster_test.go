package compat

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/proxy/listener"
)

// compatLeaseTTL is the brokers' lease TTL: how long a killed broker's
// partitions stay unowned. Clients keep their default timeouts, so the
// proxy must bridge this gap by itself. KPROXY_COMPAT_LEASE_TTL overrides
// it for experiments.
func compatLeaseTTL() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("KPROXY_COMPAT_LEASE_TTL")); err == nil && d > 0 {
		return d
	}
	return defaultLeaseTTL
}

// defaultLeaseTTL is devcluster's own default: the matrix shows failover as
// a user running the defaults would see it. (A 3 s TTL also makes every
// lease expire whenever a loaded 2-core machine stalls for 2 s.)
const defaultLeaseTTL = 10 * time.Second

// devTarget is the real thing: 3 stub brokers behind 1 kproxy, embedded etcd.
// The proxy also serves SASL_SSL (sasl_test.go).
type devTarget struct {
	c   *devcluster.Cluster
	sec *devSecurity
}

var devclusterKind = targetKind{
	name: "devcluster",
	describe: fmt.Sprintf("assembly/devcluster: 3 stub brokers (racks zone-a, zone-b, zone-c) behind 1 kproxy, embedded etcd, in-memory store, lease TTL %s; "+
		"clients are given only the proxy's address", compatLeaseTTL()),
	start: func(ctx context.Context, logs io.Writer) (target, error) {
		sec, err := newDevSecurity()
		if err != nil {
			return nil, fmt.Errorf("SASL_SSL listener: %w", err)
		}
		c, err := devcluster.Start(ctx, devcluster.Config{
			Brokers: 3, Proxies: 1, LeaseTTL: compatLeaseTTL(),
			DefaultPartitions: partitions, AutoCreateTopics: true, StoreMemory: true, Racks: compatZones,
			Logger:      slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
			ProxyConfig: sec.configure,
		})
		if err != nil {
			sec.close()
			return nil, fmt.Errorf("start devcluster: %w", err)
		}
		if err := sec.addUser(ctx, c.Client()); err != nil {
			c.Close()
			sec.close()
			return nil, fmt.Errorf("add the SASL user: %w", err)
		}
		return &devTarget{c: c, sec: sec}, nil
	},
}

func (d *devTarget) bootstrap() []string  { return d.c.ProxyAddrs() }
func (d *devTarget) advertised() []string { return d.c.ProxyAddrs() }
func (d *devTarget) close() {
	d.c.Close()
	d.sec.close()
}

func (d *devTarget) secure() *secureTarget {
	return d.sec.target(d.c.Proxy(0).ListenerAddr(string(listener.SASLSSL)))
}

func (d *devTarget) killOwner(ctx context.Context, topic string, p int32) (int32, error) {
	id, ok, err := d.c.Owner(ctx, topic, p)
	if err != nil {
		return -1, fmt.Errorf("owner of %s/%d: %w", topic, p, err)
	}
	if !ok {
		return -1, fmt.Errorf("%s/%d has no owner to kill", topic, p)
	}
	if err := d.c.KillBroker(id); err != nil {
		return id, fmt.Errorf("kill broker %d: %w", id, err)
	}
	return id, nil
}

// strandedBy is the broker id that takes a stranded partition: no broker of
// the cluster has it.
const strandedBy = 99

func (d *devTarget) strandOwner(ctx context.Context, topic string, p int32) (func(context.Context) error, error) {
	return d.c.StrandPartition(ctx, topic, p, strandedBy, time.Minute)
}
