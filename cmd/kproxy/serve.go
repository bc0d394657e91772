package main

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/leasewatch/kafscale"
	"github.com/kproxy/kproxy/proxy"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/proxy/zone"
)

func serveCommand() *cli.Command {
	return commandWithConfig("serve", "run the proxy", []cli.Flag{
		stringFlag("listen", "127.0.0.1:9092", "address Kafka clients connect to"),
		stringFlag("admin", "127.0.0.1:9644", "admin HTTP address (/healthz, /readyz, /metrics, /v1/routes)"),
		stringFlag("advertise", "", "host:port clients are told to use; the same on every replica behind one load balancer (default: --listen)"),
		intFlag("node-id", 0, "broker id clients see for the proxy; the same on every replica"),
		stringFlag("cluster-id", "kproxy", "cluster id reported in Metadata"),
		intFlag("max-inflight-per-conn", 64, "pipelined requests per client connection before the proxy stops reading"),
		intFlag("upstream-conns", 4, "multiplexed connections per broker that answers out of order (kproxy's stub broker), shared by all clients"),
		durationFlag("drain-timeout", 10*time.Second, "how long shutdown waits for in-flight requests"),
		durationFlag("buffer-trim-interval", 10*time.Second, "how often pooled frames of 1 MiB and more that went unused since the last trim are given back (kproxy_buffer_pool_free_bytes)"),
		stringFlag("produce-validation", "full", "how much of each Produce partition's record data is checked by Kafka's broker rules before it is forwarded: off, framing (batch lengths, magic, header fields) or full (framing and CRC-32C); a refused partition gets Kafka's error code (docs/compatibility.md)"),
		boolFlag("pprof", false, "serve /debug/pprof on the admin address"),
		stringFlag("zone", "", "the proxy's availability zone: the zone of clients that name none (no client.rack, no zone token in client.id, no --zone-cidrs match)"),
		stringFlag("zone-cidrs", "", "client address ranges and their zones, CIDR=ZONE,... (e.g. 10.0.0.0/20=us-east-1a,10.0.16.0/20=us-east-1b)"),
		stringFlag("fetch-from", "", "where fetches go: zone (a broker in the client's zone, any broker serves committed data) or owner; default zone for --etcd-layout kproxy, owner for kafscale (zone is refused there)"),
		boolFlag("acquire-in-zone", false, "send the first produce to a partition without a live owner to a broker in the producer's zone, so its lease lands there; owned partitions' writes always go to the owner"),
		stringFlag("etcd-layout", assembly.LayoutKproxy, "whose etcd keys to route from: kproxy (kproxy's brokers) or kafscale (KafScale's brokers; --etcd-prefix then defaults to /kafscale, see docs/kafscale.md)"),
	}, runServe, listenerFlags(), securityFlags(), saslFlags(), authzFlags(), limitFlags(), quotaFlags(), adminFlags(), upstreamFlags(), encryptionFlags())
}

func runServe(c *cli.Context) error {
	validation, err := recordcheck.ParseLevel(c.String("produce-validation"))
	if err != nil {
		return fmt.Errorf("--produce-validation: %w", err)
	}
	encryption, err := encryptionFileFrom(c) // encryption.go
	if err != nil {
		return err
	}
	logger, err := newLogger(c)
	if err != nil {
		return err
	}
	cli, err := newEtcdClient(c)
	if err != nil {
		return err
	}
	defer cli.Close()
	advertise, listeners, sec, az, err := serveSecurity(c, cli, logger)
	if err != nil {
		return err
	}

	limits, err := limitsFrom(c)
	if err != nil {
		return err
	}
	quotas, err := quotaFrom(c)
	if err != nil {
		return err
	}
	upTLS, upSASL, err := upstreamSecurityFrom(c)
	if err != nil {
		return err
	}
	ranges, err := zone.ParseRanges(c.String("zone-cidrs"))
	if err != nil {
		return fmt.Errorf("--zone-cidrs: %w", err)
	}
	reg := newRegistry()
	srv, err := assembly.New(c.Context, assembly.Config{
		Zone:                   c.String("zone"),
		ZoneRanges:             ranges,
		FetchFrom:              c.String("fetch-from"),
		AcquireInZone:          c.Bool("acquire-in-zone"),
		Authz:                  az,
		AuditAllowsEvery:       uint64(c.Int("audit-allows-every")),
		Listen:                 c.String("listen"),
		Listeners:              listeners,
		Security:               sec,
		AdminListen:            c.String("admin"),
		Advertise:              advertise,
		NodeID:                 int32(c.Int("node-id")),
		ClusterID:              c.String("cluster-id"),
		Etcd:                   cli,
		Layout:                 layout.New(etcdPrefix(c)),
		EtcdLayout:             c.String("etcd-layout"),
		AutoCreateTopics:       c.Bool("auto-create-topics"),
		DefaultPartitions:      int32(c.Int("default-partitions")),
		Server:                 serverConfig(c, limits),
		ProduceValidation:      validation,
		EncryptionFile:         encryption,
		Quota:                  quotas,
		Admin:                  adminSecurityFrom(c),
		UpstreamConnsPerBroker: c.Int("upstream-conns"),
		UpstreamMaxConns:       c.Int("upstream-max-conns-per-broker"),
		UpstreamIdleTimeout:    c.Duration("upstream-idle-timeout"),
		UpstreamTLS:            upTLS,
		UpstreamSASL:           upSASL,
		EnablePprof:            c.Bool("pprof"),
		Logger:                 logger,
		Registry:               reg,
	})
	if err != nil {
		return err
	}
	logServing(logger, srv, advertise, az)
	return srv.Run(c.Context)
}

// logServing says where the proxy listens and warns when every client may
// do everything.
func logServing(logger *slog.Logger, srv *assembly.Proxy, advertise string, az authz.Config) {
	logger.Info("proxy listening", "kafka", srv.Addr(), "admin", srv.AdminAddr(), "advertise", advertise,
		"authorizer", az.Mode.String(), "authorizer_dry_run", az.DryRun)
	if az.Mode == authz.AllowAll {
		logger.Warn("authorizer allow-all: every client may do everything; use --authorizer deny-by-default in production")
	}
}

// serveSecurity reads the advertised address, the listeners and their
// security from the flags: TLS, SASL and the super users (whose credentials it bootstraps in etcd
// when a file names them), and the authorizer, which must not allow all on
// a listener that authenticates unless asked to.
func serveSecurity(c *cli.Context, cli *clientv3.Client, logger *slog.Logger) (advertise string, listeners []listener.Listener, sec listener.Security, az authz.Config, err error) {
	advertise = c.String("advertise")
	if advertise == "" {
		advertise = c.String("listen")
	}
	if _, _, err := splitHostPort(advertise); err != nil {
		return "", nil, sec, az, fmt.Errorf("--advertise: %w", err)
	}
	listeners, err = listenersFromFlags(c)
	if err != nil {
		return "", nil, sec, az, err
	}
	mode, err := authz.ParseMode(c.String("authorizer"))
	if err != nil {
		return "", nil, sec, az, err
	}
	if err := checkSecureAuthorizer(c, listeners, mode); err != nil {
		return "", nil, sec, az, err
	}
	if listeners, err = withTLS(c, listeners); err != nil {
		return "", nil, sec, az, err
	}
	sec, err = securityFromFlags(c, logger)
	if err != nil {
		return "", nil, sec, az, err
	}
	if f := c.String("super-user-credentials-file"); f != "" {
		if len(sec.SuperUsers) == 0 {
			return "", nil, sec, az, fmt.Errorf("--super-user-credentials-file needs --super-users")
		}
		name := sec.SuperUsers[0].Name
		added, err := bootstrapSuperUser(c.Context, cli, layout.New(etcdPrefix(c)), name, f)
		if err != nil {
			return "", nil, sec, az, err
		}
		if added {
			logger.Info("super user credentials created", "user", name)
		}
	}
	az, err = authzConfig(c, sec.SuperUsers)
	if err != nil {
		return "", nil, sec, az, err
	}
	return advertise, listeners, sec, az, nil
}

// etcdPrefix is --etcd-prefix, whose default depends on --etcd-layout.
func etcdPrefix(c *cli.Context) string {
	if c.String("etcd-layout") == assembly.LayoutKafScale && !c.IsSet("etcd-prefix") {
		return kafscale.DefaultPrefix
	}
	return c.String("etcd-prefix")
}

func splitHostPort(addr string) (string, int32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", port, err)
	}
	return host, int32(p), nil
}

// serverConfig is the client-connection server's settings from the flags.
func serverConfig(c *cli.Context, limits proxy.Limits) proxy.Config {
	return proxy.Config{
		MaxFrameBytes:      int32(c.Int("max-frame-bytes")),
		MaxInFlightPerConn: c.Int("max-inflight-per-conn"),
		DrainTimeout:       c.Duration("drain-timeout"),
		BufTrimInterval:    c.Duration("buffer-trim-interval"),
		Limits:             limits,
	}
}
