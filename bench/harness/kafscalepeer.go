package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kproxy/kproxy/bench/load"
	"github.com/kproxy/kproxy/testkit/kafscalerig"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// kafscalepeer.go is the kafscale-peer scenario: kproxy against KafScale's
// own proxy, both in front of the same two real KafScale brokers
// (kafscalerig: built from KAFSCALE_SRC, a local S3, an embedded etcd),
// with franz-go producers (acks=all, linger 0) at several points. Each
// proxy is a process of its own, so that its CPU is its own user+system
// time. The sides alternate within each round; every figure is the median
// of the rounds. Without KAFSCALE_SRC the scenario is skipped with a
// message.
//
// What makes the figures comparable: KafScale's broker uploads a segment to
// S3 for every acks=all produce (coalescing the produces that wait on one
// partition), so the brokers are as fast as moto_server, a Python process
// that keeps every object in memory and slows as it grows. And which
// broker owns a partition is decided by the first produce that reaches
// one (the broker takes the partition's etcd lease), so the proxy that
// writes first places the partitions for whoever writes after it. Each
// run therefore gets a fresh rig of its own (empty S3, etcd and brokers,
// and only its side's proxy), as a user deploying either proxy gets; the
// sides alternate, at least peerMinRounds rounds. The clients' buffer is
// peerBufferBytes, not the saturating scenarios' budget: under saturation
// a record waits for everything buffered before it, so with 64 MiB
// buffered the latencies are seconds of client queueing.

const (
	kafscalePeerID    = "kafscale-peer"
	kafscalePeerTopic = "peer"
	sideKproxyKS      = "kproxy"
	sideKafScaleProxy = "kafscale-proxy"
)

// peerPoint is one load point.
type peerPoint struct{ producers, recordSize int }

var peerPoints = []peerPoint{{4, 1024}, {16, 1024}, {64, 1024}, {4, 16 << 10}}

const (
	// peerMinRounds: a median of fewer runs is one of two noisy figures.
	peerMinRounds = 3
	// peerMinWarmup lets every producer connect, get its producer id and
	// fill its in-flight window before the window opens.
	peerMinWarmup = 2 * time.Second
	// peerBufferBytes is the records buffered over all clients of a run.
	peerBufferBytes = 8 << 20
)

// peerRun is one side's figures in one round.
type peerRun struct {
	res      load.Result
	cpu      time.Duration // the proxy process's user+system time in the window
	conns    []int         // upstream connections to each broker, mid-window
	commands string
}

// peerEnv is one run's rig and the proxy of its side.
type peerEnv struct {
	rig     *kafscalerig.Rig
	kproxy  *testrig.Proc // nil on KafScale's proxy's side
	kpAddr  string
	brokers []string // broker ports, for counting connections
}

func (h *Harness) kafscalePeerScenario(ctx context.Context) error {
	if !h.selected(kafscalePeerID) {
		return nil
	}
	src := os.Getenv(kafscalerig.SrcEnv)
	if src == "" || src == "off" {
		msg := fmt.Sprintf("%s skipped: %s is unset (the folder with KafScale's build.sh and source archive)", kafscalePeerID, kafscalerig.SrcEnv)
		h.cfg.Logger.Warn(msg)
		fmt.Fprintln(os.Stderr, "bench:", msg)
		return nil
	}
	h.cfg.Logger.Info("scenario", "id", kafscalePeerID)
	bins, err := kafscalerig.Build(ctx, src, filepath.Join(h.cfg.Repo, "bin", "kafscale"))
	if err != nil {
		return fmt.Errorf("%s: %w", kafscalePeerID, err)
	}
	for _, pt := range peerPoints {
		res, err := h.peerPoint(ctx, bins, pt)
		if err != nil {
			return fmt.Errorf("%s: %w", kafscalePeerID, err)
		}
		h.report.Scenarios = append(h.report.Scenarios, res)
	}
	return nil
}

func (pt peerPoint) id() string {
	return fmt.Sprintf("%s-%dx%dk", kafscalePeerID, pt.producers, pt.recordSize>>10)
}

// startPeerEnv starts a fresh rig and side's proxy on it.
func (h *Harness) startPeerEnv(ctx context.Context, bins kafscalerig.Bins, name, side string) (*peerEnv, error) {
	dir := filepath.Join(h.dir, kafscalePeerID, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rig, err := kafscalerig.Start(ctx, kafscalerig.Config{Bins: bins, Dir: dir, KafScaleProxy: side == sideKafScaleProxy,
		Topics: map[string]int32{kafscalePeerTopic: benchPartitions}})
	if err != nil {
		return nil, err
	}
	env := &peerEnv{rig: rig}
	for _, b := range rig.Brokers {
		_, port, _ := strings.Cut(b.Addr, ":")
		env.brokers = append(env.brokers, port)
	}
	if side == sideKafScaleProxy {
		return env, nil
	}
	addrs, err := testrig.FreeAddrs(2)
	if err != nil {
		env.close()
		return nil, err
	}
	env.kpAddr = addrs[0]
	args := append([]string{"serve", "--etcd-layout", "kafscale", "--etcd-endpoints", rig.EtcdEndpoint,
		"--listen", addrs[0], "--advertise", addrs[0], "--admin", addrs[1]}, h.cfg.ProxyFlags...)
	env.kproxy = testrig.NewProc(testrig.Spec{Name: "kproxy-kafscale", Path: h.kproxy, Args: args, LogPath: filepath.Join(dir, "kproxy.log")})
	if err := env.kproxy.Start(ctx); err != nil {
		env.close()
		return nil, err
	}
	if err := testrig.WaitFor(ctx, "kproxy (kafscale layout)", env.kproxy, kafscalerig.StartWait, func(ctx context.Context) error {
		return testrig.Ping(ctx, env.kpAddr)
	}); err != nil {
		env.close()
		return nil, err
	}
	return env, nil
}

func (e *peerEnv) close() {
	if e.kproxy != nil {
		e.kproxy.Kill()
	}
	e.rig.Close()
}

// peerPoint runs one point on both sides for every round, each run on a
// fresh rig of its own.
func (h *Harness) peerPoint(ctx context.Context, bins kafscalerig.Bins, pt peerPoint) (ScenarioResult, error) {
	id := pt.id()
	h.at(id, 0, 0)
	runs := map[string][]peerRun{}
	sides := []string{sideKproxyKS, sideKafScaleProxy}
	rounds := max(h.cfg.Rounds, peerMinRounds)
	for r := range rounds {
		h.at(id, r+1, rounds)
		order := slices.Clone(sides)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, s := range order {
			run, err := h.peerRunOnFreshRig(ctx, bins, fmt.Sprintf("%s-r%d-%s", id, r+1, s), s, pt)
			if err != nil {
				return ScenarioResult{}, fmt.Errorf("%s on %s: %w", id, s, err)
			}
			runs[s] = append(runs[s], run)
		}
	}
	return peerResult(id, pt, sides, runs), nil
}

// peerRunOnFreshRig starts a rig and side s's proxy for one run alone, so
// that no run works on the S3 objects or the partition placement another
// run left behind.
func (h *Harness) peerRunOnFreshRig(ctx context.Context, bins kafscalerig.Bins, name, s string, pt peerPoint) (peerRun, error) {
	env, err := h.startPeerEnv(ctx, bins, name, s)
	if err != nil {
		return peerRun{}, err
	}
	defer env.close()
	return h.peerRunOnce(ctx, env, s, pt)
}

// peerRunOnce runs kbench produce against side s, sampling that proxy's CPU
// at the edges of the measured window and its broker connections midway.
func (h *Harness) peerRunOnce(ctx context.Context, env *peerEnv, s string, pt peerPoint) (peerRun, error) {
	seed, proc := env.kpAddr, env.kproxy
	if s == sideKafScaleProxy {
		seed, proc = env.rig.KafScaleProxyAddr, env.rig.KafScaleProxyProc
	}
	warmup := max(h.cfg.Warmup, peerMinWarmup)
	buffered := max(peerBufferBytes/pt.recordSize/pt.producers, 32)
	args := []string{"produce", "--seeds", seed, "--topic", kafscalePeerTopic, "--producers", strconv.Itoa(pt.producers),
		"--clients", strconv.Itoa(pt.producers), "--max-buffered", strconv.Itoa(buffered),
		"--record-size", strconv.Itoa(pt.recordSize), "--acks", "all", "--linger", "0",
		"--warmup", warmup.String(), "--duration", h.cfg.Duration.String()}
	p, err := h.startKbench(ctx, "kbench-"+s, args)
	if err != nil {
		return peerRun{}, err
	}
	defer p.Kill()
	start := time.Now()
	var before, after time.Duration
	var conns []int
	for _, step := range []struct {
		at time.Duration
		do func() error
	}{
		{warmup, func() (err error) { before, err = cpuTime(proc.Pid()); return }},
		{warmup + h.cfg.Duration/2, func() (err error) { conns, err = connsTo(proc.Pid(), env.brokers); return }},
		{warmup + h.cfg.Duration, func() (err error) { after, err = cpuTime(proc.Pid()); return }},
	} {
		if err := sleepUntil(ctx, start.Add(step.at)); err != nil {
			return peerRun{}, err
		}
		if err := step.do(); err != nil {
			return peerRun{}, err
		}
	}
	lineCtx, cancel := context.WithTimeout(ctx, warmup+h.cfg.Duration+time.Minute)
	defer cancel()
	line, err := p.ReadLine(lineCtx)
	if err != nil {
		return peerRun{}, fmt.Errorf("kbench: %w: %s", err, p.Tail())
	}
	var res load.Result
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return peerRun{}, fmt.Errorf("kbench result %q: %w", line, err)
	}
	h.cfg.Logger.Info("run", "side", s, "producers", pt.producers, "record", pt.recordSize,
		"MB/s", fmt.Sprintf("%.2f", res.MBPerSec), "p50us", res.Latency.P50, "p99us", res.Latency.P99, "errors", res.Errors, "conns", conns)
	return peerRun{res: res, cpu: after - before, conns: conns, commands: "kbench " + strings.Join(args, " ")}, nil
}
