// Package zones is `make zones`: it measures what zone-aware fetch routing
// saves. It runs three zones of two stub brokers (--rack), one proxy per
// zone for each routing mode (--fetch-from owner and --fetch-from zone, all
// six against the same brokers and topic), and in every zone a producer
// (client.id zone=Z) and a consumer (client.rack Z) on that zone's proxy.
// The modes take turns, in rotated order, in one run. It reports the bytes
// that crossed zones per MB produced and consumed, as the proxies count
// them (kproxy_upstream_bytes_total) and as the brokers count them
// (kproxy_broker_fetch_bytes_total, by the fetch's RackID), p99 fetch and
// end-to-end latency, checks the targets and writes docs/zones.md.
//
// Its limit: everything runs on one machine, so "cross-zone" is a label,
// not a network: the figures count bytes, and latencies show the cost of
// serving reads from a broker that learns of commits through its etcd
// watch, not of distance.
package zones

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/kproxy/kproxy/bench/scale"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// Config is what zonesrun's flags set.
type Config struct {
	Repo           string
	Zones          []string // default a, b, c
	BrokersPerZone int      // default 2
	Partitions     int32    // default 12
	Rate           float64  // records/s per producer (default 500)
	RecordSize     int      // bytes per record value (default 1000)
	Warmup         time.Duration
	Duration       time.Duration // measured window per phase
	Rounds         int           // each mode runs once per round
	KeepDir        bool
	Markdown       string
	Command        string
	Logger         *slog.Logger
}

func (c Config) withDefaults() Config {
	if len(c.Zones) == 0 {
		c.Zones = []string{"zone-a", "zone-b", "zone-c"}
	}
	if c.BrokersPerZone <= 0 {
		c.BrokersPerZone = 2
	}
	if c.Partitions <= 0 {
		c.Partitions = 12
	}
	if c.Rate <= 0 {
		c.Rate = 500
	}
	if c.RecordSize < 16 {
		c.RecordSize = 1000
	}
	if c.Warmup <= 0 {
		c.Warmup = 3 * time.Second
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 5
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Modes are the proxies' --fetch-from values, in the order of the proxies.
var Modes = []string{"owner", "zone"}

const topic = "zones"

// Run runs the scenario and writes the report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	start := time.Now()
	dir, err := os.MkdirTemp("", "kproxy-zones-")
	if err != nil {
		return nil, err
	}
	if !cfg.KeepDir {
		defer os.RemoveAll(dir)
	}
	bin := filepath.Join(dir, "kproxy")
	if err := testrig.Build(ctx, cfg.Repo, testrig.Target{Pkg: testrig.KproxyPkg, Out: bin}); err != nil {
		return nil, err
	}
	// One shared store, on tmpfs when there is one: non-owners read the
	// owners' segments, and a disk would measure the disk.
	store, err := os.MkdirTemp("/dev/shm", "kproxy-zones-store-")
	if err != nil {
		store = filepath.Join(dir, "store")
	}
	defer os.RemoveAll(store)
	nz := len(cfg.Zones)
	zoneOfBroker := func(id int32) string { return cfg.Zones[int(id-1)/cfg.BrokersPerZone] }
	env, err := scale.StartEnv(ctx, scale.EnvConfig{
		Dir: dir, Kproxy: bin, Name: "run", Store: store, Brokers: nz * cfg.BrokersPerZone, Proxies: nz * len(Modes),
		BrokerFlags: func(id int32) []string { return []string{"--rack", zoneOfBroker(id)} },
		ProxyFlags: func(i int) []string {
			return []string{"--zone", cfg.Zones[i%nz], "--fetch-from", Modes[i/nz]}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	defer env.Close()
	if err := env.PutTopic(ctx, topic, cfg.Partitions); err != nil {
		return nil, err
	}
	rig := env.Rig()
	rep := &Report{Config: cfg, Started: start, Modes: map[string]*ModeResult{}}
	for _, m := range Modes {
		rep.Modes[m] = newModeResult(m)
	}
	brokers := make([]site, len(rig.Brokers))
	for i, b := range rig.Brokers {
		brokers[i] = site{addr: b.MetricsAddr, zone: zoneOfBroker(b.ID)}
	}
	if err := warm(ctx, rig.Proxies[0].Addr, cfg.Partitions); err != nil {
		return nil, fmt.Errorf("warm up: %w", err)
	}
	for r := range cfg.Rounds {
		for k := range Modes {
			mode := Modes[(k+r)%len(Modes)]
			proxies := make([]site, nz)
			for z := range nz {
				p := rig.Proxies[modeIndex(mode)*nz+z]
				proxies[z] = site{addr: p.Addr, admin: p.AdminAddr, zone: cfg.Zones[z]}
			}
			cfg.Logger.Info("zones phase", "round", r+1, "mode", mode)
			if err := runPhase(ctx, cfg, proxies, brokers, rep.Modes[mode]); err != nil {
				return nil, fmt.Errorf("round %d, %s routing: %w", r+1, mode, err)
			}
		}
	}
	rep.finish(time.Since(start))
	if cfg.Markdown != "" {
		if err := os.WriteFile(cfg.Markdown, []byte(rep.Markdown()), 0o644); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

func modeIndex(mode string) int {
	for i, m := range Modes {
		if m == mode {
			return i
		}
	}
	panic("zones: unknown mode " + mode)
}

// site is one proxy or broker: its Kafka address (proxies), its metrics
// address and its zone.
type site struct {
	addr, admin, zone string
}

// metricsAddr is where the site serves /metrics.
func (s site) metricsAddr() string {
	if s.admin != "" {
		return s.admin
	}
	return s.addr
}

var errNoRecords = errors.New("no records consumed in the window")
