package harness

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kproxy/kproxy/bench/load"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// MemoryResult is the cost of idle client connections on one side.
type MemoryResult struct {
	Side         string  `json:"side"`
	Conns        int     `json:"conns"`
	RSSBefore    int64   `json:"rss_before_bytes"`
	RSSAfter     int64   `json:"rss_after_bytes"`
	BytesPerConn float64 `json:"bytes_per_conn"`
	// GoBytesPerConn is the growth of the Go heap and stacks in use per
	// connection, from the proxy's /metrics (a cross-check of the RSS
	// figure; 0 where there are no metrics).
	GoBytesPerConn float64 `json:"go_heap_stack_bytes_per_conn,omitempty"`
	Command        string  `json:"command"`
}

// memoryScenario opens many idle connections to the proxy (and, for
// comparison, to one relay) and divides the process's RSS growth by them.
func (h *Harness) memoryScenario(ctx context.Context) error {
	if !h.selected("memory") {
		return nil
	}
	h.cfg.Logger.Info("scenario", "id", "memory", "conns", h.cfg.IdleConns)
	h.at("memory", 0, 0)
	// A relayed connection holds six descriptors (two sockets and, while
	// each direction waits in splice, two pipes), so the relay gets fewer.
	relayConns := min(h.cfg.IdleConns, int(h.report.Environment.OpenFileLimit-1000)/6)
	for _, s := range []struct {
		name  string
		addr  string
		proc  *testrig.Proc
		conns int
	}{
		{sideProxy, h.cluster.proxy.Addr, h.cluster.proxy.Proc, h.cfg.IdleConns},
		{sideRelay, h.cluster.brokers[0].relay, h.cluster.relays[0], relayConns},
	} {
		m, err := h.idleConns(ctx, s.name, s.addr, s.proc, s.conns)
		if err != nil {
			return fmt.Errorf("memory on %s: %w", s.name, err)
		}
		h.report.Memory = append(h.report.Memory, m)
	}
	return nil
}

// settle is how long RSS is given to settle after the connections open.
const settle = 2 * time.Second

func (h *Harness) idleConns(ctx context.Context, name, addr string, target *testrig.Proc, n int) (MemoryResult, error) {
	m := MemoryResult{Side: name, Conns: n}
	var err error
	if m.RSSBefore, err = testrig.RSSBytes(target.Pid()); err != nil {
		return m, err
	}
	goBefore := h.proxyGoMemory(ctx, name)
	args := []string{"conns", "--addr", addr, "--n", strconv.Itoa(n), "--parallel", "32", "--exit-on-stdin-eof"}
	m.Command = "kbench " + strings.Join(args, " ")
	p, err := h.startKbench(ctx, "kbench-conns", args)
	if err != nil {
		return m, err
	}
	defer p.Stop(10 * time.Second)
	lineCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	line, err := p.ReadLine(lineCtx)
	if err != nil {
		return m, err
	}
	var res load.Result
	if err := json.Unmarshal([]byte(line), &res); err != nil || res.Conns != n {
		return m, fmt.Errorf("kbench conns answered %q (%v)", line, err)
	}
	if err := sleepUntil(ctx, time.Now().Add(settle)); err != nil {
		return m, err
	}
	if m.RSSAfter, err = testrig.RSSBytes(target.Pid()); err != nil {
		return m, err
	}
	m.BytesPerConn = float64(m.RSSAfter-m.RSSBefore) / float64(m.Conns)
	if goAfter := h.proxyGoMemory(ctx, name); goBefore > 0 && goAfter > 0 {
		m.GoBytesPerConn = float64(goAfter-goBefore) / float64(m.Conns)
	}
	h.cfg.Logger.Info("idle connections", "side", name, "conns", m.Conns, "KiB/conn", m.BytesPerConn/1024)
	return m, nil
}

// proxyGoMemory is the proxy's Go heap plus stacks in use, from /metrics;
// 0 for other sides or when the metrics are missing.
func (h *Harness) proxyGoMemory(ctx context.Context, side string) int64 {
	if side != sideProxy {
		return 0
	}
	m, err := testrig.Scrape(ctx, h.cluster.proxy.AdminAddr, "go_memstats_")
	if err != nil {
		return 0
	}
	heap, okHeap := m["go_memstats_heap_inuse_bytes"]
	stack, okStack := m["go_memstats_stack_inuse_bytes"]
	if !okHeap || !okStack {
		return 0
	}
	return int64(heap + stack)
}

// ConvergenceResult is how fast the proxy routes by an owner change.
type ConvergenceResult struct {
	Samples int          `json:"samples"`
	Latency load.Latency `json:"latency_us"`
	Method  string       `json:"method"`
}

// convergenceScenario moves the owner of a partition of a topic nobody uses
// between the live brokers, straight in etcd, and times each change until
// the proxy's routing table is complete up to the change's revision (its
// /readyz revision), then checks /v1/routes shows the new owner.
func (h *Harness) convergenceScenario(ctx context.Context) error {
	if !h.selected("route-convergence") {
		return nil
	}
	h.cfg.Logger.Info("scenario", "id", "route-convergence")
	h.at("route-convergence", 0, 0)
	const topic = "kbench-routes"
	c := h.cluster
	l := c.layout
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return fmt.Errorf("topic id: %w", err)
	}
	info := layout.TopicInfo{Name: topic, ID: hex.EncodeToString(id), Partitions: 1}
	if _, err := c.etcdCli.Put(ctx, l.TopicKey(topic), layout.Marshal(info)); err != nil {
		return fmt.Errorf("put topic %s: %w", topic, err)
	}
	defer func() {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = c.etcdCli.Delete(cleanup, l.OwnerKey(topic, 0))
		_, _ = c.etcdCli.Delete(cleanup, l.TopicKey(topic))
	}()
	hc := &http.Client{Timeout: 2 * time.Second}
	hist := load.NewHistogram()
	for i := range h.cfg.ConvergenceSamples {
		owner := c.brokers[i%len(c.brokers)].ID
		start := time.Now()
		resp, err := c.etcdCli.Put(ctx, l.OwnerKey(topic, 0), layout.Marshal(layout.Owner{Broker: owner}))
		if err != nil {
			return fmt.Errorf("put owner: %w", err)
		}
		rev := resp.Header.Revision
		if err := h.waitRevision(ctx, rev); err != nil {
			return err
		}
		took := time.Since(start)
		_ = hist.RecordValue(max(took.Microseconds(), 1))
		if err := h.checkRoute(ctx, hc, topic, owner); err != nil {
			return err
		}
		if err := sleepUntil(ctx, time.Now().Add(20*time.Millisecond)); err != nil {
			return err
		}
	}
	h.report.Convergence = &ConvergenceResult{
		Samples: h.cfg.ConvergenceSamples, Latency: load.Summarize(hist),
		Method: "owner key Put in etcd (timed from before the Put) until the proxy's /readyz revision reaches the Put's revision, polled back to back over HTTP; /v1/routes is then checked to show the new owner",
	}
	return nil
}

func (h *Harness) waitRevision(ctx context.Context, rev int64) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r, err := adminapi.FetchReadiness(ctx, h.cluster.proxy.AdminAddr)
		if err != nil {
			return err
		}
		if r.Revision >= rev {
			return nil
		}
	}
	return fmt.Errorf("proxy did not reach revision %d within 10s", rev)
}

func (h *Harness) checkRoute(ctx context.Context, hc *http.Client, topic string, owner int32) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.cluster.proxy.AdminAddr+"/v1/routes", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("proxy /v1/routes: %w", err)
	}
	defer resp.Body.Close()
	var snap struct {
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Owner     int32  `json:"owner"`
		} `json:"partitions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		return fmt.Errorf("proxy /v1/routes: %w", err)
	}
	for _, p := range snap.Partitions {
		if p.Topic == topic && p.Partition == 0 {
			if p.Owner != owner {
				return fmt.Errorf("/v1/routes shows owner %d of %s/0 after its revision, want %d", p.Owner, topic, owner)
			}
			return nil
		}
	}
	return fmt.Errorf("/v1/routes does not list %s/0", topic)
}

// RoutingBench is one line of `go test -bench`: the routing table's
// benchmarks and the split and merge paths' (proxy/apis).
type RoutingBench struct {
	Package string  `json:"package,omitempty"`
	Name    string  `json:"name"`
	NsPerOp float64 `json:"ns_per_op"`
	// Metrics is what the line reports after ns/op (B/op, allocs/op,
	// MB/s, the table's bytes).
	Metrics string `json:"metrics,omitempty"`
	Line    string `json:"line"`
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+([\d.]+) ns/op\s*(.*)$`)

// goBenchPackages hold the Go benchmarks the report lists: the routing
// table with 100,000 partitions and 1,000 brokers (lookups, one watch
// event applied, memory), the request split and merge paths, and record
// encryption per codec beside the cipher alone.
var goBenchPackages = []string{"./routing/", "./proxy/apis/", "./proxy/crypt/"}

// routingBench runs the packages' Go benchmarks with -benchmem.
func (h *Harness) routingBench(ctx context.Context) error {
	if !h.selected("routing-lookup") {
		return nil
	}
	h.cfg.Logger.Info("scenario", "id", "routing-lookup")
	h.at("routing-lookup", 0, 0)
	args := append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-benchtime", "1s"}, goBenchPackages...)
	h.report.RoutingCommand = "go test -run '^$' " + strings.Join(args[3:], " ")
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = h.cfg.Repo
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go benchmarks: %w: %s", err, out)
	}
	h.report.Routing = parseBenchOutput(string(out))
	if len(h.report.Routing) == 0 {
		return fmt.Errorf("go benchmarks printed no results: %s", out)
	}
	return nil
}

// parseBenchOutput reads `go test -bench` output of one or more packages.
func parseBenchOutput(out string) []RoutingBench {
	var res []RoutingBench
	pkg := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimPrefix(strings.TrimSpace(p), "github.com/kproxy/kproxy/")
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ns, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		res = append(res, RoutingBench{Package: pkg, Name: m[1], NsPerOp: ns,
			Metrics: strings.Join(strings.Fields(m[4]), " "), Line: strings.Join(strings.Fields(line), " ")})
	}
	return res
}
