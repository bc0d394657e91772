package main

import (
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/promreg"
	"github.com/kproxy/kproxy/layout"
)

// envPrefix makes every flag settable as KPROXY_<FLAG> (dashes become underscores).
const envPrefix = "KPROXY_"

func envVars(flag string) []string {
	return []string{envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))}
}

// withConfigFile lets a YAML file given by --config set any flag; explicit
// flags and environment variables win over the file.
func withConfigFile(flags []cli.Flag) ([]cli.Flag, cli.BeforeFunc) {
	flags = append(flags, &cli.StringFlag{Name: "config", Usage: "YAML file whose keys are flag names (see config.example.yaml)", EnvVars: envVars("config")})
	return flags, altsrc.InitInputSourceWithContext(flags, altsrc.NewYamlSourceFromFlagFunc("config"))
}

func stringFlag(name, value, usage string) cli.Flag {
	return altsrc.NewStringFlag(&cli.StringFlag{Name: name, Value: value, Usage: usage, EnvVars: envVars(name)})
}

func intFlag(name string, value int, usage string) cli.Flag {
	return altsrc.NewIntFlag(&cli.IntFlag{Name: name, Value: value, Usage: usage, EnvVars: envVars(name)})
}

func boolFlag(name string, value bool, usage string) cli.Flag {
	return altsrc.NewBoolFlag(&cli.BoolFlag{Name: name, Value: value, Usage: usage, EnvVars: envVars(name)})
}

func durationFlag(name string, value time.Duration, usage string) cli.Flag {
	return altsrc.NewDurationFlag(&cli.DurationFlag{Name: name, Value: value, Usage: usage, EnvVars: envVars(name)})
}

func logFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("log-level", "info", "debug, info, warn or error"),
		stringFlag("log-format", "text", "text or json"),
	}
}

func newLogger(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.String("log-format") {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", c.String("log-format"))
	}
}

func etcdFlags() []cli.Flag {
	return append([]cli.Flag{
		stringFlag("etcd-endpoints", "http://127.0.0.1:2379", "comma-separated etcd client URLs"),
		stringFlag("etcd-prefix", "/kproxy", "root of every key kproxy reads and writes"),
		durationFlag("etcd-dial-timeout", 5*time.Second, "timeout for the first connection to etcd"),
	}, etcdSecurityFlags()...)
}

func newEtcdClient(c *cli.Context) (*clientv3.Client, error) {
	cfg, err := etcdClientConfig(c)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to etcd %v: %w", cfg.Endpoints, err)
	}
	return cli, nil
}

// etcdClientConfig is the etcd client configuration the flags describe.
func etcdClientConfig(c *cli.Context) (clientv3.Config, error) {
	var endpoints []string
	for _, e := range strings.Split(c.String("etcd-endpoints"), ",") {
		if e = strings.TrimSpace(e); e != "" {
			endpoints = append(endpoints, e)
		}
	}
	if len(endpoints) == 0 {
		return clientv3.Config{}, fmt.Errorf("--etcd-endpoints is empty")
	}
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: c.Duration("etcd-dial-timeout"),
		// Keepalives on the gRPC connection notice a dead etcd member quickly.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
	}
	if err := etcdSecurity(c, &cfg); err != nil {
		return clientv3.Config{}, err
	}
	return cfg, nil
}

// topicFlags are the settings every process that may create topics shares.
func topicFlags() []cli.Flag {
	return []cli.Flag{
		boolFlag("auto-create-topics", true, "create unknown topics when a client's Metadata request allows it"),
		intFlag("default-partitions", 3, "partitions of an auto-created topic"),
		intFlag("max-frame-bytes", 100<<20, "largest request frame accepted from a client"),
	}
}

// commandWithConfig builds a long-running command whose flags are the given
// ones plus topic, etcd and log flags, all settable from --config.
func commandWithConfig(name, usage string, own []cli.Flag, action cli.ActionFunc, more ...[]cli.Flag) *cli.Command {
	for _, m := range more {
		own = append(own, m...)
	}
	flags := append(own, topicFlags()...)
	flags = append(flags, etcdFlags()...)
	flags, before := withConfigFile(append(flags, logFlags()...))
	return &cli.Command{Name: name, Usage: usage, Flags: flags, Before: before, Action: action}
}

// newRegistry is a process's own metrics registry, with the Go runtime's and
// the process's collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	// go_gc_heap_live_bytes too: the heap the last collection found live;
	// unlike go_memstats_heap_alloc_bytes it does not count garbage, so it
	// shows memory that is held rather than not yet collected.
	promreg.Register(reg, collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
		collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})))
	promreg.Register(reg, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// withEtcd runs f with an etcd client and the layout of --etcd-prefix, for
// the commands that change etcd directly (users, acls).
func withEtcd(f func(c *cli.Context, cl *clientv3.Client, l layout.Layout) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		cl, err := newEtcdClient(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		return f(c, cl, layout.New(c.String("etcd-prefix")))
	}
}
