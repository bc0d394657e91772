package kafscale

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/internal/testtools/kafscalerig"
	"github.com/kproxy/kproxy/internal/testtools/kafscalerig/rigtest"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/proxy/assembly"
)

// realEnv is two real KafScale brokers (kafscalerig) with kproxy in
// KafScale mode, in-process, in front of them.
type realEnv struct {
	t   testing.TB
	rig *kafscalerig.Rig
	kp  *rigtest.Kproxy
}

// newRealEnv starts the rig with topics and kproxy, and waits until
// kproxy's routing has the snapshot. brokerEnv tunes the brokers.
func newRealEnv(t testing.TB, topics map[string]int32, brokerEnv ...string) *realEnv {
	t.Helper()
	rig := rigtest.Start(t, kafscalerig.Config{Topics: topics, BrokerEnv: brokerEnv})
	e := &realEnv{t: t, rig: rig}
	e.kp = rigtest.StartKproxy(t, rig, testLogger(t), func(c *assembly.Config) {
		c.ClusterID = "kproxy-over-real-kafscale"
	})
	rev, err := rig.Etcd.Get(context.Background(), "/kafscale/metadata/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	e.waitReady(fmt.Sprintf("routing at etcd revision %d", rev.Header.Revision), func(r adminapi.Readiness) bool {
		return r.Synced && r.Revision >= rev.Header.Revision
	})
	return e
}

func (e *realEnv) waitReady(what string, cond func(adminapi.Readiness) bool) {
	e.t.Helper()
	waitReadyAt(e.t, e.kp.AdminAddr(), what, cond)
}

// client is a kgo client whose only seed is kproxy.
func (e *realEnv) client(opts ...kgo.Opt) *kgo.Client {
	e.t.Helper()
	return proxyClient(e.t, e.kp.Addr(), opts...)
}

// produceN produces n records to topic through kproxy (acks=all) and
// returns their values, failing the test on any error.
func (e *realEnv) produceN(ctx context.Context, topic string, n int, opts ...kgo.Opt) map[string]bool {
	e.t.Helper()
	cl := e.client(append([]kgo.Opt{kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...)
	want := map[string]bool{}
	var recs []*kgo.Record
	for i := range n {
		v := fmt.Sprintf("%s-%d", topic, i)
		want[v] = true
		recs = append(recs, &kgo.Record{Key: []byte(v), Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		e.t.Fatalf("produce %d records to %s through kproxy: %v", n, topic, err)
	}
	return want
}

// consumeAll reads topic from the start through kproxy until every value
// of want was seen or ctx ends; it returns what was missing.
func (e *realEnv) consumeAll(ctx context.Context, topic string, want map[string]bool, opts ...kgo.Opt) []string {
	e.t.Helper()
	cl := e.client(append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond)}, opts...)...)
	seen := map[string]bool{}
	for ctx.Err() == nil && len(seen) < len(want) {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(tp string, p int32, err error) {
			if ctx.Err() == nil {
				e.t.Logf("fetch %s/%d: %v", tp, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if want[string(r.Value)] {
				seen[string(r.Value)] = true
			}
		})
	}
	var missing []string
	for v := range want {
		if !seen[v] {
			missing = append(missing, v)
		}
	}
	return missing
}
