package scale

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// SizeResult is what one partition count measured.
type SizeResult struct {
	Partitions int `json:"partitions"`
	// ColdStart is the time until one record per partition, all produced at
	// once through both proxies, was acknowledged; Failed counts records
	// answered with an error, Unanswered those the producer never answered
	// (a client hang).
	ColdStart  time.Duration `json:"cold_start"`
	Failed     int           `json:"failed_records"`
	Unanswered int           `json:"unanswered_records"`
	FirstErr   string        `json:"first_error,omitempty"`
	// etcd during the cold start.
	EtcdTxnPerSec      float64 `json:"etcd_txn_per_sec"`
	EtcdProposalPerSec float64 `json:"etcd_proposals_per_sec"`
	EtcdDBBytes        float64 `json:"etcd_db_bytes"`
	// SessionLosses is -1 when the brokers do not export the counter.
	SessionLosses   float64 `json:"session_losses"`
	OwnershipLosses float64 `json:"ownership_losses"`
	// Takeover is from kill -9 of the broker holding the most partitions
	// until the survivors own all of them (a producer asks for each).
	Takeover       time.Duration `json:"takeover"`
	TakeoverParts  int           `json:"takeover_partitions"`
	TakeoverFailed int           `json:"takeover_failed_records"`
	// TakeoverErr says why the takeover did not complete (Takeover is then
	// the time waited).
	TakeoverErr string `json:"takeover_error,omitempty"`
	ProxyFigures
}

// ProxyFigures are the proxies' memory, Metadata latency for every topic
// (against the first proxy) and route convergence across both.
type ProxyFigures struct {
	ProxyRSS      []int64       `json:"proxy_rss_bytes"`
	MetadataP50   time.Duration `json:"metadata_p50"`
	MetadataMax   time.Duration `json:"metadata_max"`
	MetadataParts int           `json:"metadata_partitions"`
	ConvergeP50   time.Duration `json:"convergence_p50"`
	ConvergeP99   time.Duration `json:"convergence_p99"`
	ConvergeN     int           `json:"convergence_samples"`
}

// proxyFigures measures ProxyFigures; the convergence moves partition 0 of
// topic to owner(i) for each sample.
func proxyFigures(ctx context.Context, e *Env, topic string, samples int, owner func(int) int32) (ProxyFigures, error) {
	var f ProxyFigures
	for _, p := range e.rig.Proxies {
		rss, err := testrig.RSSBytes(p.Proc.Pid())
		if err != nil {
			return f, err
		}
		f.ProxyRSS = append(f.ProxyRSS, rss)
	}
	lat, parts, err := metadataLatency(ctx, e.rig.Proxies[0].Addr, 5)
	if err != nil {
		return f, err
	}
	f.MetadataP50, f.MetadataMax, f.MetadataParts = percentile(lat, 0.5), percentile(lat, 1), parts
	conv, err := timeMoves(ctx, e, topic, samples, owner)
	if err != nil {
		return f, err
	}
	f.ConvergeP50, f.ConvergeP99, f.ConvergeN = percentile(conv, 0.5), percentile(conv, 0.99), len(conv)
	return f, nil
}

const scaleTopic = "scale"

func (r *runner) size(ctx context.Context, n, round int) (res SizeResult, err error) {
	res = SizeResult{Partitions: n, SessionLosses: -1}
	log := r.cfg.Logger.With("partitions", n)
	log.Info("scale: start processes")
	r.at(fmt.Sprintf("%d partitions: start processes", n), round)
	e, err := StartEnv(ctx, EnvConfig{Dir: r.dir, Kproxy: r.kproxy, Brokers: 3, Proxies: 2,
		LeaseTTL: r.cfg.LeaseTTL, Name: fmt.Sprintf("p%d", n)})
	if err != nil {
		return res, err
	}
	defer e.Close()
	if err := e.PutTopic(ctx, scaleTopic, int32(n)); err != nil {
		return res, err
	}
	etcdAddr := e.endpoint[len("http://"):]
	before, err := readEtcd(ctx, etcdAddr)
	if err != nil {
		return res, err
	}
	log.Info("scale: cold start")
	r.at(fmt.Sprintf("%d partitions: cold start", n), round)
	storm, err := ProduceEach(ctx, e.rig.ProxyAddrs(), scaleTopic, AllParts(int32(n)), r.cfg.DeliveryTimeout)
	if err != nil {
		return res, err
	}
	res.ColdStart, res.Failed, res.Unanswered = storm.Took, storm.Failed, storm.Unanswered
	if err := storm.Err(); err != nil {
		res.FirstErr = err.Error()
	}
	after, err := readEtcd(ctx, etcdAddr)
	if err != nil {
		return res, err
	}
	res.EtcdTxnPerSec, res.EtcdProposalPerSec = rates(before, after)
	res.EtcdDBBytes = after.dbBytes
	log.Info("scale: proxies' memory, Metadata and route convergence")
	r.at(fmt.Sprintf("%d partitions: proxies' memory, Metadata and route convergence", n), round)
	const routes = "scale-routes"
	if err := e.PutTopic(ctx, routes, 1); err != nil {
		return res, err
	}
	if res.ProxyFigures, err = proxyFigures(ctx, e, routes, r.cfg.ConvergenceSamples,
		func(i int) int32 { return e.rig.Brokers[i%len(e.rig.Brokers)].ID }); err != nil {
		return res, err
	}
	log.Info("scale: kill the broker holding the most partitions")
	r.at(fmt.Sprintf("%d partitions: kill the broker holding the most partitions", n), round)
	if err := r.takeover(ctx, e, n, &res); err != nil {
		return res, err
	}
	return res, nil
}

// takeover kills the broker that owns the most partitions of the scale
// topic with SIGKILL, then produces to each of its partitions until the
// survivors own them all, and reads the survivors' loss counters.
func (r *runner) takeover(ctx context.Context, e *Env, n int, res *SizeResult) error {
	owners, err := e.rig.Owners(ctx, scaleTopic)
	if err != nil {
		return err
	}
	count := map[int32]int{}
	for _, b := range owners {
		count[b]++
	}
	var victim *testrig.Broker
	for _, b := range e.rig.Brokers {
		if victim == nil || count[b.ID] > count[victim.ID] {
			victim = b
		}
	}
	var parts []int32
	for p, b := range owners {
		if b == victim.ID {
			parts = append(parts, p)
		}
	}
	res.TakeoverParts = len(parts)
	// The victim's own counters, read before it dies, count toward losses.
	var lossErr error
	if l, err := ReadLosses(ctx, victim.MetricsAddr); err == nil {
		addLosses(res, l)
	} else {
		lossErr = err
	}
	start := time.Now()
	if err := victim.Proc.Kill(); err != nil {
		return err
	}
	var survivors []string
	for _, p := range e.rig.Proxies {
		survivors = append(survivors, p.Addr)
	}
	storm, err := ProduceEach(ctx, survivors, scaleTopic, parts, r.cfg.LeaseTTL+r.cfg.DeliveryTimeout)
	if err != nil {
		return err
	}
	res.TakeoverFailed = storm.Failed + storm.Unanswered
	perr := storm.Err()
	err = testrig.WaitFor(ctx, "takeover", e.rig.Proxies[0].Proc, r.cfg.LeaseTTL+time.Minute, func(ctx context.Context) error {
		owners, err := e.rig.Owners(ctx, scaleTopic)
		if err != nil {
			return err
		}
		if len(owners) < n || ownedBy(owners, parts, victim.ID) {
			return fmt.Errorf("%d of %d partitions owned, some still by the killed broker %d", len(owners), n, victim.ID)
		}
		return nil
	})
	res.Takeover = time.Since(start)
	if err != nil {
		// A figure, not the end of the run: the target shows it missed.
		res.TakeoverErr = errors.Join(err, perr).Error()
		r.cfg.Logger.Warn("scale: takeover incomplete", "partitions", n, "err", res.TakeoverErr)
	}
	for _, b := range e.rig.Brokers {
		if b == victim {
			continue
		}
		l, err := ReadLosses(ctx, b.MetricsAddr)
		if err != nil {
			lossErr = errors.Join(lossErr, err)
			continue
		}
		addLosses(res, l)
	}
	return lossErr
}

func addLosses(res *SizeResult, l BrokerLosses) {
	if l.SessionCounter {
		res.SessionLosses = max(res.SessionLosses, 0) + l.Sessions
	}
	res.OwnershipLosses += l.Ownerships
}

func ownedBy(owners map[int32]int32, parts []int32, id int32) bool {
	for _, p := range parts {
		if owners[p] == id {
			return true
		}
	}
	return false
}

// timeMoves puts partition 0 of topic to owner(i) for each sample straight
// in etcd and times each put until both proxies' tables are complete up to
// its revision.
func timeMoves(ctx context.Context, e *Env, topic string, samples int, owner func(int) int32) ([]time.Duration, error) {
	var out []time.Duration
	for i := range samples {
		start := time.Now()
		resp, err := e.cli.Put(ctx, e.layout.OwnerKey(topic, 0), layout.Marshal(layout.Owner{Broker: owner(i)}))
		if err != nil {
			return nil, fmt.Errorf("put owner: %w", err)
		}
		if err := e.waitProxies(ctx, resp.Header.Revision, 10*time.Second); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
		select { // spaced, so that each move is its own watch event
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return out, nil
}
