package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/refbroker/broker"
	"github.com/kproxy/kproxy/refbroker/store"
)

func brokerCommand() *cli.Command {
	return commandWithConfig("broker", "run a stub broker that enforces partition ownership with etcd leases", append([]cli.Flag{
		intFlag("id", 1, "broker id, unique in the pool"),
		stringFlag("listen", "127.0.0.1:9101", "address for Kafka clients and proxies"),
		stringFlag("advertise", "", "host:port written to etcd and Metadata (default: the bound --listen address)"),
		stringFlag("rack", "", "the broker's zone (Kafka's broker.rack), written to its etcd record: proxies keep fetches of clients in this zone on brokers of this zone"),
		stringFlag("store", "", "shared object store folder, or \"memory\" (benchmarks only: data dies with the process)"),
		durationFlag("lease-ttl", 10*time.Second, "etcd session lease TTL; ownership is lost this long after the broker stops answering"),
		stringFlag("metrics", "", "optional HTTP address serving /metrics for this broker"),
		boolFlag("serial-requests", false, "serve one request per connection at a time and never answer out of order, as Apache Kafka and KafScale do (to run proxies against a real broker's shape)"),
	}, append(unsafeBrokerFlags(), brokerTLSFlags()...)...), runBroker)
}

func runBroker(c *cli.Context) error {
	logger, err := newLogger(c)
	if err != nil {
		return err
	}
	st, err := openStore(c.String("store"))
	if err != nil {
		return err
	}
	tlsCfg, err := brokerTLSFrom(c)
	if err != nil {
		return err
	}
	ecfg, err := etcdClientConfig(c)
	if err != nil {
		return err
	}
	cli, err := newEtcdClient(c)
	if err != nil {
		return err
	}
	defer cli.Close()
	reg := newRegistry()
	cfg := broker.Config{
		ID:                int32(c.Int("id")),
		Listen:            c.String("listen"),
		TLS:               tlsCfg,
		Advertise:         c.String("advertise"),
		Rack:              c.String("rack"),
		Etcd:              cli,
		EtcdConfig:        &ecfg,
		Layout:            layout.New(c.String("etcd-prefix")),
		Store:             st,
		LeaseTTL:          c.Duration("lease-ttl"),
		AutoCreateTopics:  c.Bool("auto-create-topics"),
		DefaultPartitions: int32(c.Int("default-partitions")),
		MaxFrameBytes:     int32(c.Int("max-frame-bytes")),
		SerialRequests:    c.Bool("serial-requests"),
		Logger:            logger,
		Registerer:        reg,
	}
	applyUnsafeBrokerFlags(c, &cfg)
	b, err := broker.New(c.Context, cfg)
	if err != nil {
		return err
	}
	if addr := c.String("metrics"); addr != "" {
		stop, err := serveMetrics(c.Context, addr, reg, logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	logger.Info("broker listening", "id", c.Int("id"), "kafka", b.Addr())
	return b.Run(c.Context)
}

func openStore(spec string) (store.ObjectStore, error) {
	switch spec {
	case "":
		return nil, fmt.Errorf("--store is required: a shared folder, or \"memory\"")
	case "memory":
		return store.NewMemory(), nil
	default:
		return store.NewFS(spec)
	}
}

// serveMetrics serves /metrics until the returned stop is called.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, logger *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "err", err)
		}
	}()
	return func() {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		srv.Shutdown(shutdownCtx)
		<-done
	}, nil
}
