// Command etcdmember runs one member of a multi-member etcd cluster in its own
// process (the real server, go.etcd.io/etcd/server/v3/embed), so that a fault
// test can kill -9, pause and restart it. Election timing is etcd's default.
//
// It prints "etcdmember <name> ready" on stdout once it serves clients and
// stops cleanly on SIGTERM or SIGINT. Restarted on the same data directory it
// rejoins with its old identity (the initial cluster flags are then ignored by
// etcd, as for any member with existing data).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

type options struct {
	name, dir, client, peer, cluster, state, logLevel, token string
	noFsync                                                  bool
	quotaBytes                                               int64
}

func main() {
	var o options
	flag.StringVar(&o.name, "name", "", "member name (required)")
	flag.StringVar(&o.dir, "data-dir", "", "data directory (required)")
	flag.StringVar(&o.client, "client", "", "client listen host:port (required)")
	flag.StringVar(&o.peer, "peer", "", "peer listen host:port (required)")
	flag.StringVar(&o.cluster, "initial-cluster", "", "name=http://host:port,... of every member (required)")
	flag.StringVar(&o.state, "initial-cluster-state", "new", "new or existing")
	flag.StringVar(&o.token, "initial-cluster-token", "kchaos", "cluster token")
	flag.StringVar(&o.logLevel, "log-level", "warn", "etcd log level")
	flag.BoolVar(&o.noFsync, "unsafe-no-fsync", false, "skip fsync (faster; unsafe under kill -9)")
	flag.Int64Var(&o.quotaBytes, "quota-backend-bytes", 0, "backend quota (0: etcd default)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "etcdmember %s: %v\n", o.name, err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.name == "" || o.dir == "" || o.client == "" || o.peer == "" || o.cluster == "" {
		return errors.New("-name, -data-dir, -client, -peer and -initial-cluster are required")
	}
	cfg, err := config(o)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd in %s: %w", o.dir, err)
	}
	defer e.Close()
	// A member waits for a quorum before it is ready; when two members are
	// down that can take as long as they stay down, so there is no deadline
	// here: the supervisor decides how long to wait.
	select {
	case <-e.Server.ReadyNotify():
		fmt.Printf("etcdmember %s ready\n", o.name)
	case err := <-e.Err():
		return fmt.Errorf("etcd failed before ready: %w", err)
	case <-ctx.Done():
		return nil
	}
	select {
	case err := <-e.Err():
		return fmt.Errorf("etcd failed: %w", err)
	case <-ctx.Done():
		closed := make(chan struct{})
		go func() { e.Close(); close(closed) }() // joined below, bounded
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			return errors.New("close timed out")
		}
		return nil
	}
}

func config(o options) (*embed.Config, error) {
	cu, err := url.Parse("http://" + o.client)
	if err != nil {
		return nil, fmt.Errorf("client address %q: %w", o.client, err)
	}
	pu, err := url.Parse("http://" + o.peer)
	if err != nil {
		return nil, fmt.Errorf("peer address %q: %w", o.peer, err)
	}
	if o.state != embed.ClusterStateFlagNew && o.state != embed.ClusterStateFlagExisting {
		return nil, fmt.Errorf("initial-cluster-state %q: want new or existing", o.state)
	}
	if !strings.Contains(o.cluster, o.name+"=") {
		return nil, fmt.Errorf("initial-cluster %q does not name member %q", o.cluster, o.name)
	}
	cfg := embed.NewConfig()
	cfg.Name = o.name
	cfg.Dir = o.dir
	cfg.LogLevel = o.logLevel
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = o.cluster
	cfg.ClusterState = o.state
	cfg.InitialClusterToken = o.token
	cfg.UnsafeNoFsync = o.noFsync
	if o.quotaBytes > 0 {
		cfg.QuotaBackendBytes = o.quotaBytes
	}
	return cfg, nil
}
