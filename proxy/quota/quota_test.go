package quota

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func lim(typ Type, v float64) Limits {
	var l Limits
	l.Value[typ], l.Has[typ] = v, true
	return l
}

// TestPrecedence checks Kafka's order of entity matches (docs "Quotas":
// /config/users/<user>/clients/<client-id> first, .../clients/<default>
// last) and the sampler each match measures by.
func TestPrecedence(t *testing.T) {
	u, c, du, dc, no := Named("alice"), Named("app"), DefaultPart(), DefaultPart(), Part{}
	all := []Entity{
		{u, c}, {u, dc}, {u, no}, {du, c}, {du, dc}, {du, no}, {no, c}, {no, dc},
	}
	wantKeys := []SamplerKey{
		{User: "alice", Client: "app"}, {User: "alice", Client: "app"}, {User: "alice"},
		{User: "alice", Client: "app"}, {User: "alice", Client: "app"}, {User: "alice"},
		{Client: "app"}, {Client: "app"},
	}
	// Drop the most specific entity one at a time: the next one applies.
	for i := range all {
		entries := map[Entity]Limits{}
		for j, e := range all[i:] {
			entries[e] = lim(ProducerByteRate, float64(100*(i+j+1)))
		}
		m := NewTable(entries).Lookup("alice", "app")[ProducerByteRate]
		want := Match{Limit: float64(100 * (i + 1)), Key: wantKeys[i], OK: true}
		if m != want {
			t.Errorf("entities from rung %d: got %+v, want %+v", i+1, m, want)
		}
	}

	cases := []struct {
		name         string
		entries      map[Entity]Limits
		user, client string
		typ          Type
		want         Match
	}{
		{"none", nil, "alice", "app", ProducerByteRate, Match{}},
		{"other user", map[Entity]Limits{{Named("bob"), no}: lim(ProducerByteRate, 1)}, "alice", "app", ProducerByteRate, Match{}},
		{"other client", map[Entity]Limits{{no, Named("x")}: lim(ProducerByteRate, 1)}, "alice", "app", ProducerByteRate, Match{}},
		{"types resolve apart", map[Entity]Limits{
			{u, c}:   lim(ConsumerByteRate, 5),
			{no, dc}: lim(ProducerByteRate, 7),
		}, "alice", "app", ProducerByteRate, Match{Limit: 7, Key: SamplerKey{Client: "app"}, OK: true}},
		{"default user gives each user its own rate", map[Entity]Limits{{du, no}: lim(RequestPercentage, 50)},
			"bob", "x", RequestPercentage, Match{Limit: 50, Key: SamplerKey{Type: RequestPercentage, User: "bob"}, OK: true}},
		{"user+client beats user", map[Entity]Limits{{u, no}: lim(ConsumerByteRate, 1), {u, c}: lim(ConsumerByteRate, 2)},
			"alice", "app", ConsumerByteRate, Match{Limit: 2, Key: SamplerKey{Type: ConsumerByteRate, User: "alice", Client: "app"}, OK: true}},
		{"user beats client", map[Entity]Limits{{no, c}: lim(ConsumerByteRate, 1), {u, no}: lim(ConsumerByteRate, 2)},
			"alice", "app", ConsumerByteRate, Match{Limit: 2, Key: SamplerKey{Type: ConsumerByteRate, User: "alice"}, OK: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tab := NewTable(tc.entries)
			for range 2 { // second lookup from the cache
				if got := tab.Lookup(tc.user, tc.client)[tc.typ]; got != tc.want {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock               { return &fakeClock{t: time.Unix(1_000_000, 0)} }
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestThrottleTime checks Kafka's formula, (observed - limit) / limit *
// window, against a fake clock.
func TestThrottleTime(t *testing.T) {
	clk := newClock()
	reg := prometheus.NewRegistry()
	m := must(New(Config{Samples: 11, Window: time.Second, Now: clk.now, Registerer: reg}))
	if n := testutil.CollectAndCount(reg); n != 2*int(NumTypes)+1 {
		t.Fatalf("%d series exported before any throttle, want %d (throttles at 0, replicas)", n, 2*NumTypes+1)
	}
	m.SetTable(NewTable(map[Entity]Limits{{User: Named("alice")}: lim(ProducerByteRate, 1000)}))

	// A new client may send (samples-1) windows' worth at once: 10,000
	// bytes is exactly the limit over Kafka's 10 s span.
	if d := m.Record("alice", "c", Usage{ProduceBytes: 10_000}); d != 0 {
		t.Fatalf("at the limit: throttled %v", d)
	}
	// 15,000 bytes over 10 s = 1,500/s: (1500-1000)/1000 * 10 s = 5 s.
	if d := m.Record("alice", "c", Usage{ProduceBytes: 5_000}); d != 5*time.Second {
		t.Fatalf("50%% over: throttle %v, want 5s", d)
	}
	// Another user has no quota.
	if d := m.Record("bob", "c", Usage{ProduceBytes: 1 << 30}); d != 0 {
		t.Fatalf("bob throttled %v", d)
	}
	// 16 s later the 5 s debt is paid and the 10 s of credit back.
	clk.add(16 * time.Second)
	if d := m.Record("alice", "c", Usage{ProduceBytes: 100}); d != 0 {
		t.Fatalf("after the window: throttled %v", d)
	}
	// A huge burst is bounded by MaxThrottle (samples * window).
	if d := m.Record("alice", "c", Usage{ProduceBytes: 1 << 30}); d != 11*time.Second {
		t.Fatalf("burst: throttle %v, want the 11s bound", d)
	}
	if got := testutil.ToFloat64(m.m.throttled[ProducerByteRate]); got != 2 {
		t.Fatalf("throttled responses %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.m.seconds[ProducerByteRate]); got != 16 {
		t.Fatalf("throttle seconds %v, want 16", got)
	}
	clk.add(30 * time.Second)
	m.Evict()
	if n := m.buckets(); n != 0 {
		t.Fatalf("%d buckets left after eviction", n)
	}
}

// TestSteadyRate drives a client that obeys every throttle and checks the
// rate it gets is the limit.
func TestSteadyRate(t *testing.T) {
	clk := newClock()
	m := must(New(Config{Samples: 11, Window: time.Second, Now: clk.now}))
	m.SetTable(NewTable(map[Entity]Limits{{Client: DefaultPart()}: lim(ConsumerByteRate, 1<<20)}))
	// A new client may burst up to samples-1 windows' worth (Kafka's
	// rate counts at least that span); measure after it.
	warm := clk.t.Add(15 * time.Second)
	var start time.Time
	sent := 0
	for range 3000 {
		if start.IsZero() && !clk.t.Before(warm) {
			start = clk.t
		}
		if !start.IsZero() {
			sent += 64 << 10
		}
		d := m.Record("ANONYMOUS", "c", Usage{FetchBytes: 64 << 10})
		clk.add(time.Millisecond + d)
	}
	rate := float64(sent) / clk.t.Sub(start).Seconds()
	if rate > 1.01*(1<<20) || rate < 0.95*(1<<20) {
		t.Fatalf("obeying client got %.0f B/s, want about %d", rate, 1<<20)
	}
}

// TestReplicasDivideByteRates: byte rates are shared by the live replicas;
// a request share is each replica's own.
func TestReplicasDivideByteRates(t *testing.T) {
	clk := newClock()
	m := must(New(Config{Samples: 11, Window: time.Second, Now: clk.now}))
	all := Limits{}
	for typ := range NumTypes {
		all.Value[typ], all.Has[typ] = 1000, true
	}
	m.SetTable(NewTable(map[Entity]Limits{{User: DefaultPart()}: all}))
	m.SetReplicas(4)
	// 10 s span: 2,500 bytes is exactly 250/s, a quarter of 1000.
	if d := m.Record("u", "c", Usage{ProduceBytes: 2500}); d != 0 {
		t.Fatalf("at a quarter: throttled %v", d)
	}
	if d := m.Record("u", "c", Usage{ProduceBytes: 2500}); d != 10*time.Second {
		t.Fatalf("at half with 4 replicas: throttle %v, want 10s", d)
	}
	if got := m.EffectiveLimit(RequestPercentage, 1000); got != 1000 {
		t.Fatalf("request share divided: %v", got)
	}
	m.SetReplicas(0)
	if got := m.Replicas(); got != 1 {
		t.Fatalf("replicas %d, want at least 1", got)
	}
}

// TestRequestPercentage: request time counts in Kafka's unit, percent of
// one thread: 100 ms of handling per second is 10%.
func TestRequestPercentage(t *testing.T) {
	clk := newClock()
	m := must(New(Config{Samples: 11, Window: time.Second, Now: clk.now}))
	m.SetTable(NewTable(map[Entity]Limits{{User: Named("ANONYMOUS")}: lim(RequestPercentage, 10)}))
	m.SetReplicas(3) // not divided
	// 10 s of credit at 10% is 1 s of handling.
	if d := m.Record("ANONYMOUS", "c", Usage{RequestTime: time.Second}); d != 0 {
		t.Fatalf("within credit: throttled %v", d)
	}
	// 100 ms more is 10 percent-seconds over: 1 s at 10%.
	if d := m.Record("ANONYMOUS", "c", Usage{RequestTime: 100 * time.Millisecond}); d != time.Second {
		t.Fatalf("over: throttle %v, want 1s", d)
	}
	// Bytes of a client with only a request quota are not limited.
	if d := m.Record("ANONYMOUS", "c", Usage{ProduceBytes: 1 << 30, FetchBytes: 1 << 30}); d != 0 {
		t.Fatalf("byte rates limited by a request quota: %v", d)
	}
}

// TestChargeAllocates nothing once an entity's rate exists, nor a lookup
// in an empty table: the request path of every client.
func TestChargeAllocates(t *testing.T) {
	m := must(New(Config{}))
	if n := testing.AllocsPerRun(100, func() { m.Record("u", "c", Usage{ProduceBytes: 1, RequestTime: 1}) }); n != 0 {
		t.Errorf("no quotas: %v allocations per request", n)
	}
	m.SetTable(NewTable(map[Entity]Limits{{User: Named("u")}: lim(ProducerByteRate, 1<<30)}))
	matches := m.Table().Lookup("u", "c")
	m.Charge(matches, Usage{ProduceBytes: 1})
	if n := testing.AllocsPerRun(100, func() { m.Charge(matches, Usage{ProduceBytes: 1}) }); n != 0 {
		t.Errorf("with a quota: %v allocations per request", n)
	}
}
