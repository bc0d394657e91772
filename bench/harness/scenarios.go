package harness

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// benchPartitions is the partition count of every benchmark topic.
const benchPartitions = 16

// ScenarioResult is one table of the report.
type ScenarioResult struct {
	ID     string       `json:"id"`
	Title  string       `json:"title"`
	What   string       `json:"what"`
	Sides  []SideResult `json:"sides"`
	Ratios []Ratio      `json:"ratios"`
	Notes  []string     `json:"notes,omitempty"`
}

// Ratio compares two sides.
type Ratio struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"` // "x" for a ratio, "ms" for a difference
}

func (s ScenarioResult) side(name string) (SideResult, bool) {
	for _, r := range s.Sides {
		if r.Side == name {
			return r, true
		}
	}
	return SideResult{}, false
}

// compare runs the plan on every side and builds the scenario's table.
func (h *Harness) compare(ctx context.Context, id, title, what string, plan roundPlan) (ScenarioResult, error) {
	sides := sideNames
	if slices.Contains(copyRelayScenarios, id) {
		sides = append(slices.Clip(sideNames), sideCopyRelay)
	}
	res, err := h.compareSides(ctx, id, title, what, sides, plan)
	if err != nil {
		return res, err
	}
	d, _ := res.side(sideDirect)
	p, _ := res.side(sideProxy)
	r, _ := res.side(sideRelay)
	res.Ratios = []Ratio{
		{"kproxy / direct throughput", div(p.RecordsPerSec, d.RecordsPerSec), "x"},
		{"relay / direct throughput", div(r.RecordsPerSec, d.RecordsPerSec), "x"},
		{"kproxy / relay throughput", div(p.RecordsPerSec, r.RecordsPerSec), "x"},
		{"kproxy - direct p99", float64(p.Latency.P99-d.Latency.P99) / 1000, "ms"},
		{"relay - direct p99", float64(r.Latency.P99-d.Latency.P99) / 1000, "ms"},
	}
	h.report.Scenarios = append(h.report.Scenarios, res)
	return res, nil
}

// compareSides runs the plan on sides and merges each side's runs; the
// caller adds the ratios and the result to the report.
func (h *Harness) compareSides(ctx context.Context, id, title, what string, sides []string, plan roundPlan) (ScenarioResult, error) {
	h.cfg.Logger.Info("scenario", "id", id)
	h.at(id, 0, 0)
	runs, err := h.runRounds(ctx, sides, plan)
	if err != nil {
		return ScenarioResult{}, fmt.Errorf("scenario %s: %w", id, err)
	}
	res := ScenarioResult{ID: id, Title: title, What: what}
	for _, name := range sides {
		sr, err := merge(name, runs[name])
		if err != nil {
			return ScenarioResult{}, fmt.Errorf("scenario %s: %w", id, err)
		}
		res.Sides = append(res.Sides, sr)
	}
	return res, nil
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// produceArgs are kbench produce flags for a saturating or rate-limited run.
type produceArgs struct {
	topic      string
	recordSize int
	producers  int
	clients    int
	rate       float64
	warmup     time.Duration // 0: Config.Warmup
	codec      string        // batch compression ("": none)
}

// maxBuffered is the per-client kgo MaxBufferedRecords that spreads the
// run's buffer budget (Config.BufferBytes) over its clients. kgo's default
// of 50,000 records per client would measure seconds of queueing in the
// client rather than the path to the brokers.
func (h *Harness) maxBuffered(recordSize, clients int) int {
	return max(h.cfg.BufferBytes/max(recordSize, 1)/max(clients, 1), 32)
}

func (h *Harness) produceSpec(a produceArgs) runSpec {
	clients := max(a.clients, 1)
	maxBuffered := h.maxBuffered(a.recordSize, clients)
	warmup := h.cfg.Warmup
	if a.warmup > 0 {
		warmup = a.warmup
	}
	args := []string{"--topic", a.topic, "--record-size", strconv.Itoa(a.recordSize),
		"--producers", strconv.Itoa(a.producers), "--clients", strconv.Itoa(clients), "--acks", "all",
		"--warmup", warmup.String(), "--duration", h.cfg.Duration.String(),
		"--max-buffered", strconv.Itoa(maxBuffered)}
	if a.rate > 0 {
		args = append(args, "--rate", strconv.FormatFloat(a.rate, 'f', 0, 64))
	}
	if a.codec != "" {
		args = append(args, "--compression", a.codec)
	}
	return runSpec{cmd: "produce", args: args, warmup: warmup, window: h.cfg.Duration,
		limit: warmup + h.cfg.Duration + 2*time.Minute}
}

// prime creates topic through the brokers and writes to every partition so
// that each has an owner before anything is measured.
func (h *Harness) prime(ctx context.Context, topic string) error {
	parts := make([]string, benchPartitions)
	for i := range parts {
		parts[i] = strconv.Itoa(i)
	}
	_, err := h.runKbench(ctx, h.cluster.side(sideDirect), runSpec{cmd: "produce", args: []string{
		"--topic", topic, "--create", strconv.Itoa(benchPartitions), "--partitions", strings.Join(parts, ","),
		"--record-size", "100", "--producers", "1", "--rate", "2000", "--warmup", "0s", "--duration", "500ms",
	}, limit: 2 * time.Minute})
	if err != nil {
		return fmt.Errorf("prime %s: %w", topic, err)
	}
	owners, err := h.cluster.owners(ctx, topic)
	if err != nil {
		return err
	}
	if len(owners) != benchPartitions {
		return fmt.Errorf("prime %s: %d of %d partitions have an owner", topic, len(owners), benchPartitions)
	}
	return nil
}

// freshTopic restarts the brokers (empty memory stores), compacts etcd and
// primes topic.
func (h *Harness) freshTopic(ctx context.Context, topic string) error {
	size, err := h.cluster.compactEtcd(ctx)
	if err != nil {
		return err
	}
	h.report.noteEtcdSize(size, topic)
	h.cfg.Logger.Info("etcd compacted", "db_bytes_before", size, "next_topic", topic)
	if err := h.cluster.restartBrokers(ctx); err != nil {
		return err
	}
	return h.prime(ctx, topic)
}

// roundTopic is the topic of round r: every round starts on fresh brokers,
// whose empty memory stores cannot serve an older round's data.
func roundTopic(topic string, r int) string { return fmt.Sprintf("%s-r%d", topic, r+1) }

// freshPlan restarts the brokers and primes a new topic before every
// round: saturating runs put gigabytes into the brokers' memory stores.
// Then settleSeconds of unmeasured saturating produce grow the restarted
// brokers' heaps, so that the round's first side does not pay alone for it
// (a direct run that came first after a restart had a p99 ten times its
// second run's).
func (h *Harness) freshPlan(topic string, spec func(topic string) runSpec) roundPlan {
	return roundPlan{
		spec: func(r int) runSpec { return spec(roundTopic(topic, r)) },
		before: func(ctx context.Context, r int) error {
			t := roundTopic(topic, r)
			if err := h.freshTopic(ctx, t); err != nil {
				return err
			}
			return h.fill(ctx, t, settleSeconds)
		},
	}
}

const settleSeconds = 2

// fill produces saturating 1 KiB records to topic for secs seconds straight
// to the brokers, unmeasured.
func (h *Harness) fill(ctx context.Context, topic string, secs int) error {
	return h.fillVia(ctx, sideDirect, topic, secs)
}

// fillVia is fill through side via (the encryption scenario fills through
// the encrypting proxy).
func (h *Harness) fillVia(ctx context.Context, via, topic string, secs int) error {
	spec := h.produceSpec(produceArgs{topic: topic, recordSize: 1024, producers: 8, clients: 8})
	spec.args = append(spec.args, "--warmup", "0s", "--duration", strconv.Itoa(secs)+"s")
	spec.window = 0
	_, err := h.runKbench(ctx, h.cluster.side(via), spec)
	return err
}

// produceFor makes a produce spec for any topic from a template.
func (h *Harness) produceFor(a produceArgs) func(topic string) runSpec {
	return func(topic string) runSpec {
		a.topic = topic
		return h.produceSpec(a)
	}
}

// fillSeconds is how long the fetch scenario's data is produced for.
const fillSeconds = 3

// fetchMinRounds: a fetch run reads its fill in about a second, and one
// side's runs differ by up to 1.7x on this machine (458k to 783k records/s
// for direct in six pinned rounds), more than the 5% the pinned target
// allows; runs of two rounds gave kproxy/direct from 0.82 to 1.34; six
// rounds cost about 45 s more than two.
const fetchMinRounds = 6

// fillPlan prepares every fetch round: fresh brokers and topic, then
// fillSeconds of saturating 1 KiB produce straight to the brokers and one
// read, neither measured, so that no side pays alone for what the brokers'
// caches keep after a first read.
func (h *Harness) fillPlan(topic string) roundPlan { return h.fillPlanVia(topic, sideDirect) }

// fillPlanVia is fillPlan with the data produced through side via.
func (h *Harness) fillPlanVia(topic, via string) roundPlan {
	return roundPlan{
		spec: func(r int) runSpec { return consumeSpec(roundTopic(topic, r), h.cfg.Duration) },
		before: func(ctx context.Context, r int) error {
			t := roundTopic(topic, r)
			if err := h.freshTopic(ctx, t); err != nil {
				return err
			}
			if err := h.fillVia(ctx, via, t, fillSeconds); err != nil {
				return err
			}
			_, err := h.runKbench(ctx, h.cluster.side(sideDirect), consumeSpec(t, h.cfg.Duration))
			return err
		},
	}
}

func consumeSpec(topic string, d time.Duration) runSpec {
	return runSpec{cmd: "consume", args: []string{"--topic", topic, "--consumers", "4", "--duration", d.String()},
		limit: d + 2*time.Minute}
}

// manyWarmup is the warm-up of the many-clients scenario.
func manyWarmup(w time.Duration) time.Duration { return max(w, 5*time.Second) }

// coreScenarios are produce-1k, the latency at half its direct saturated
// rate, fetch and produce-100b, with prefix before their ids and topics (the
// pinned runs repeat them).
func (h *Harness) coreScenarios(ctx context.Context, prefix string) error {
	var directRate float64
	if h.selected(prefix+"produce-1k", prefix+"latency-half-rate") {
		sat, err := h.compare(ctx, prefix+"produce-1k", title(prefix)+"Produce 1 KiB records, acks=all, 8 producers",
			"16 partitions over 3 brokers, 8 producers each with its own kgo client, as fast as the clients' buffers allow",
			h.freshPlan(prefix+"bench-1k", h.produceFor(produceArgs{recordSize: 1024, producers: 8, clients: 8})))
		if err != nil {
			return err
		}
		d, _ := sat.side(sideDirect)
		directRate = d.RecordsPerSec
	}
	if h.selected(prefix + "latency-half-rate") {
		rate := directRate / 2
		if _, err := h.compare(ctx, prefix+"latency-half-rate",
			title(prefix)+fmt.Sprintf("Produce latency at half the direct saturated rate (%.0f records/s)", rate),
			"the produce-1k set-up at a fixed total rate; latency counts from each record's intended send time",
			h.freshPlan(prefix+"bench-half", h.produceFor(produceArgs{recordSize: 1024, producers: 8, clients: 8, rate: rate}))); err != nil {
			return err
		}
	}
	if h.selected(prefix + "fetch") {
		plan := h.fillPlan(prefix + "bench-fetch")
		plan.minRounds = fetchMinRounds
		if _, err := h.compare(ctx, prefix+"fetch", title(prefix)+"Fetch: 4 consumers read the same data back",
			fmt.Sprintf("before each round the brokers restart and %d s of saturating 1 KiB produce fill a 16-partition topic and one unmeasured read warms the brokers' caches; every run then reads it from offset 0 to the end offsets at its start (capped at the run duration), at least %d rounds; latency is the fetch request round trip", fillSeconds, fetchMinRounds),
			plan); err != nil {
			return err
		}
	}
	if h.selected(prefix + "produce-100b") {
		a := produceArgs{topic: prefix + "bench-100b", recordSize: 100, producers: 8, clients: 8}
		if _, err := h.compare(ctx, prefix+"produce-100b", title(prefix)+"Produce 100-byte records, acks=all, 8 producers",
			"as produce-1k with 100-byte values", h.freshPlan(a.topic, h.produceFor(a))); err != nil {
			return err
		}
	}
	return nil
}

// title is the table title's start for a scenario prefix.
func title(prefix string) string {
	if prefix == pinnedPrefix {
		return "Pinned: "
	}
	return ""
}

// produceScenarios are the throughput comparisons, the latency at half the
// direct saturated rate and the read-back.
func (h *Harness) produceScenarios(ctx context.Context) error {
	if err := h.coreScenarios(ctx, ""); err != nil {
		return err
	}
	for _, sc := range []struct {
		id, title, what string
		args            produceArgs
	}{
		{"produce-1k-1conn", "Produce 1 KiB records over 1 client connection", "8 producing goroutines share one kgo client",
			produceArgs{topic: "bench-1conn", recordSize: 1024, producers: 8, clients: 1}},
		{"produce-1k-many", fmt.Sprintf("Produce 1 KiB records from %d client connections", h.cfg.ManyClients),
			fmt.Sprintf("%d kgo clients, one producing goroutine each, %d buffered records per client; the warm-up is %s because that many clients take seconds to connect, fetch metadata and get producer ids",
				h.cfg.ManyClients, h.maxBuffered(1024, h.cfg.ManyClients), manyWarmup(h.cfg.Warmup)),
			produceArgs{topic: "bench-many", recordSize: 1024, producers: h.cfg.ManyClients, clients: h.cfg.ManyClients,
				warmup: manyWarmup(h.cfg.Warmup)}},
	} {
		if !h.selected(sc.id) {
			continue
		}
		if _, err := h.compare(ctx, sc.id, sc.title, sc.what, h.freshPlan(sc.args.topic, h.produceFor(sc.args))); err != nil {
			return err
		}
	}
	return nil
}

// idleBrokerScenario checks that a fetch spanning all brokers answers as
// soon as data arrives even though one broker has nothing to return.
func (h *Harness) idleBrokerScenario(ctx context.Context) error {
	if !h.selected("fetch-idle-broker") {
		return nil
	}
	const topic = "bench-idle"
	if err := h.freshTopic(ctx, topic); err != nil {
		return err
	}
	owners, err := h.cluster.owners(ctx, topic)
	if err != nil {
		return err
	}
	idle := h.cluster.brokers[len(h.cluster.brokers)-1].ID
	var written []string
	idleParts := 0
	for p := range int32(benchPartitions) {
		if owners[p] == idle {
			idleParts++
			continue
		}
		written = append(written, strconv.Itoa(int(p)))
	}
	if idleParts == 0 || len(written) == 0 {
		return fmt.Errorf("fetch-idle-broker: broker %d owns %d partitions, others %d: cannot make one broker idle", idle, idleParts, len(written))
	}
	grace := 10 * time.Second
	res, err := h.compare(ctx, "fetch-idle-broker", "Fetch spanning all brokers with one broker idle",
		fmt.Sprintf("one consumer reads all 16 partitions from their end; a producer writes 1,000 stamped 1 KiB records/s to the %d partitions of brokers other than %d, whose %d partitions stay empty; latency is send to receipt; kgo's fetch MaxWait is 5 s",
			len(written), idle, idleParts),
		samePlan(runSpec{cmd: "e2e", args: []string{"--topic", topic, "--record-size", "1024", "--rate", "1000",
			"--partitions", strings.Join(written, ","), "--warmup", h.cfg.Warmup.String(),
			"--duration", h.cfg.Duration.String(), "--grace", grace.String()},
			warmup: h.cfg.Warmup, window: h.cfg.Duration, limit: h.cfg.Warmup + h.cfg.Duration + grace + 2*time.Minute}))
	if err != nil {
		return err
	}
	h.report.Scenarios[len(h.report.Scenarios)-1].Notes = append(res.Notes,
		"A proxy that waited for every broker's answer before replying would show a p50 near 5,000 ms here.")
	return nil
}

// serialProducers are the producer counts of the serial-broker scenarios.
var serialProducers = []int{4, 16, 64}

func serialID(n int) string { return fmt.Sprintf("serial-produce-1k-%dp", n) }

// serialScenarios produce 1 KiB records at 4, 16 and 64 producers to stub
// brokers restarted with --serial-requests: one request per connection at
// a time and no unordered answers, the shape of Kafka and KafScale, which
// the stub broker's default hides. The brokers get their default back
// afterwards.
func (h *Harness) serialScenarios(ctx context.Context) (err error) {
	ids := make([]string, 0, len(serialProducers))
	for _, n := range serialProducers {
		ids = append(ids, serialID(n))
	}
	if !h.selected(ids...) {
		return nil
	}
	if err := h.cluster.setSerialBrokers(ctx, true); err != nil {
		return err
	}
	defer func() {
		if e := h.cluster.setSerialBrokers(ctx, false); err == nil {
			err = e
		}
	}()
	for _, n := range serialProducers {
		if !h.selected(serialID(n)) {
			continue
		}
		a := produceArgs{topic: fmt.Sprintf("bench-serial-%d", n), recordSize: 1024, producers: n, clients: n}
		if _, err := h.compare(ctx, serialID(n), fmt.Sprintf("Produce 1 KiB records, %d producers, to brokers serving one request per connection at a time", n),
			fmt.Sprintf("16 partitions over 3 stub brokers started with --serial-requests (as Kafka and KafScale: one request per connection at a time, in order), %d producers each with its own kgo client", n),
			h.freshPlan(a.topic, h.produceFor(a))); err != nil {
			return err
		}
	}
	return nil
}
