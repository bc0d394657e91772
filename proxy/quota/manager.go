// Package quota enforces Kafka's client quotas (KIP-13, KIP-55, KIP-219)
// on one proxy replica: producer and consumer byte rates and a request
// time share, per user (the connection's principal) and client id, with
// Kafka's precedence of entity matches. It measures each entity's usage
// against its limit over Kafka's window (bucket.go) and answers how long
// a request's client must be throttled; the caller puts that in throttle_time_ms and holds the
// connection's next read for as long (KIP-219).
//
// Its limit: it sees only this replica's traffic. Byte-rate limits are
// divided by the number of live replicas registered in etcd (store.go),
// which is exact when clients spread evenly over replicas; see
// docs/quotas.md. Configuration lives in etcd (Store); the table in force
// is replaced atomically, so the request path takes no lock but its
// entity's sampler's.
package quota

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kproxy/kproxy/internal/promreg"
)

// Config configures a Manager; zero values take Kafka's defaults.
type Config struct {
	// Samples and Window are Kafka's quota.window.num [11] and
	// quota.window.size.seconds [1s]: a client may burst (Samples-1) *
	// Window worth of its quota.
	Samples int
	Window  time.Duration
	// MaxThrottle bounds one throttle [Samples * Window].
	MaxThrottle time.Duration
	Now         func() time.Time      // [time.Now]
	Registerer  prometheus.Registerer // nil: not exported
}

const numShards = 32

// Manager measures rates against the quotas in force.
type Manager struct {
	cfg      Config
	table    atomic.Pointer[Table]
	replicas atomic.Int32
	seed     maphash.Seed
	shards   [numShards]shard
	m        metrics
}

type shard struct {
	mu sync.Mutex
	s  map[SamplerKey]*bucket
}

// New returns a Manager with no quotas in force.
func New(cfg Config) (*Manager, error) {
	if cfg.Samples < 2 {
		cfg.Samples = 11
	}
	if cfg.Window <= 0 {
		cfg.Window = time.Second
	}
	if cfg.MaxThrottle <= 0 {
		cfg.MaxThrottle = cfg.Window * time.Duration(cfg.Samples)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	m := &Manager{cfg: cfg, seed: maphash.MakeSeed()}
	m.m.init(cfg.Registerer)
	for i := range m.shards {
		m.shards[i].s = map[SamplerKey]*bucket{}
	}
	m.table.Store(NewTable(nil))
	m.SetReplicas(1)
	return m, nil
}

// SetTable puts t in force.
func (m *Manager) SetTable(t *Table) { m.table.Store(t) }

// Table is the table in force.
func (m *Manager) Table() *Table { return m.table.Load() }

// SetReplicas sets the live replica count byte rates are divided by.
func (m *Manager) SetReplicas(n int) {
	n = max(1, n)
	m.replicas.Store(int32(n))
	m.m.replicas.Set(float64(n))
}

// Replicas is the live replica count in force.
func (m *Manager) Replicas() int { return int(m.replicas.Load()) }

// Usage is what one request cost, as Kafka counts it.
type Usage struct {
	ProduceBytes int           // the request's size, for a Produce
	FetchBytes   int           // the response's size, for a Fetch
	RequestTime  time.Duration // the proxy's own handling time, for any request
}

// Record charges u to user and client id and returns how long the client
// must be throttled: the longest of the throttles its quotas call for.
func (m *Manager) Record(user, client string, u Usage) time.Duration {
	return m.Charge(m.table.Load().Lookup(user, client), u)
}

// Charge is Record for quotas already looked up (Table.Lookup), which a
// caller may keep while the table in force is the same.
func (m *Manager) Charge(matches *[NumTypes]Match, u Usage) time.Duration {
	var d time.Duration
	if u.ProduceBytes > 0 {
		d = max(d, m.charge(&matches[ProducerByteRate], float64(u.ProduceBytes)))
	}
	if u.FetchBytes > 0 {
		d = max(d, m.charge(&matches[ConsumerByteRate], float64(u.FetchBytes)))
	}
	if u.RequestTime > 0 {
		// Kafka's unit: percent of one thread, so seconds * 100 per second.
		d = max(d, m.charge(&matches[RequestPercentage], u.RequestTime.Seconds()*100))
	}
	return d
}

// EffectiveLimit is the limit this replica enforces for a quota: byte
// rates divided by the live replica count, a request share as it is (it
// is a share of each replica's own time, like Kafka's per broker).
func (m *Manager) EffectiveLimit(typ Type, limit float64) float64 {
	if typ == RequestPercentage {
		return limit
	}
	return limit / float64(m.replicas.Load())
}

func (m *Manager) charge(match *Match, v float64) time.Duration {
	if !match.OK {
		return 0
	}
	now := m.cfg.Now()
	limit := m.EffectiveLimit(match.Key.Type, match.Limit)
	burst := m.cfg.Window * time.Duration(m.cfg.Samples-1) // Kafka's shortest measured span
	d := m.bucket(match.Key, now).record(v, limit, now, burst, m.cfg.MaxThrottle)
	if d > 0 {
		m.m.throttled[match.Key.Type].Inc()
		m.m.seconds[match.Key.Type].Add(d.Seconds())
	}
	return d
}

func (m *Manager) bucket(k SamplerKey, now time.Time) *bucket {
	var h maphash.Hash
	h.SetSeed(m.seed)
	h.WriteByte(byte(k.Type))
	h.WriteString(k.User)
	h.WriteByte(0)
	h.WriteString(k.Client)
	sh := &m.shards[h.Sum64()%numShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s, ok := sh.s[k]
	if !ok {
		s = newBucket(now)
		sh.s[k] = s
	}
	return s
}

// Evict drops the rates of entities idle for twice the whole window (their
// credit would be full again), so that memory follows the live clients. The owner calls it periodically.
func (m *Manager) Evict() {
	before := m.cfg.Now().Add(-2 * m.cfg.Window * time.Duration(m.cfg.Samples))
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		for k, s := range sh.s {
			if s.idle(before) {
				delete(sh.s, k)
			}
		}
		sh.mu.Unlock()
	}
}

// buckets counts the measured rates (tests).
func (m *Manager) buckets() int {
	n := 0
	for i := range m.shards {
		m.shards[i].mu.Lock()
		n += len(m.shards[i].s)
		m.shards[i].mu.Unlock()
	}
	return n
}

// Millis is d as throttle_time_ms, rounded down: the proxy's mute holds
// the client to the exact time, and a client that waited the rounded-up
// time (plus its wake-up) on every request would fall short of its quota.
func Millis(d time.Duration) int32 {
	if d <= 0 {
		return 0
	}
	return int32(min(d/time.Millisecond, math.MaxInt32))
}

type metrics struct {
	throttled [NumTypes]prometheus.Counter
	seconds   [NumTypes]prometheus.Counter
	replicas  prometheus.Gauge
}

// init makes the metrics and registers them on reg (nil: not registered),
// sharing series another manager on reg registered (promreg's policy).
func (mt *metrics) init(reg prometheus.Registerer) {
	throttled := promreg.CounterVec(reg, prometheus.CounterOpts{
		Name: "kproxy_quota_throttled_responses_total",
		Help: "Responses throttled by a client quota, by quota type.",
	}, []string{"quota"})
	seconds := promreg.CounterVec(reg, prometheus.CounterOpts{
		Name: "kproxy_quota_throttle_seconds_total",
		Help: "Throttle time given to clients by a client quota, by quota type.",
	}, []string{"quota"})
	mt.replicas = promreg.Gauge(reg, prometheus.GaugeOpts{
		Name: "kproxy_quota_replicas",
		Help: "Live proxy replicas this replica divides byte-rate quotas by.",
	})
	for t := range NumTypes { // exported at 0
		mt.throttled[t] = throttled.WithLabelValues(t.String())
		mt.seconds[t] = seconds.WithLabelValues(t.String())
	}
}
