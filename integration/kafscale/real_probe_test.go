package kafscale

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kproxy/kproxy/proxy/apis/recordcheck/probe"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// TestRealProduceProbeShapes sends each hostile record shape of the
// validation probe (package probe) raw through kproxy, in KafScale mode at
// the default --produce-validation full, to two real KafScale brokers,
// which store what they are sent: each is refused with Kafka's code, a
// valid batch beside it in the same request is acknowledged, and
// afterwards every acknowledged record (from before, beside and after the
// shapes) reads back with kgo and with kcat.
func TestRealProduceProbeShapes(t *testing.T) {
	shapes := probe.Shapes()
	parts := int32(len(shapes) + 1) // one partition per shape, the last for valid data
	const topic = "real-probe"
	e := newRealEnv(t, map[string]int32{topic: parts})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	producer := e.client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	acked := map[string]bool{}
	produceEach := func(round string) {
		for p := range parts {
			r := &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%s-%d", round, p)}
			if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %s to partition %d: %v", round, p, err)
			}
			acked[string(r.Value)] = true
		}
	}
	produceEach("before")
	raw := e.client(kgo.MaxVersions(kversion.V3_0_0())) // Produce v9: topics by name
	good := parts - 1
	for i, s := range shapes {
		value := fmt.Sprint("beside-", i)
		got := rawProduce(ctx, t, raw, topic, map[int32][]byte{int32(i): s.Records, good: probe.Valid(probe.None, 1, value)})
		if code := got[int32(i)]; code != s.Code {
			t.Errorf("%s: answered %v, want %v", s.Name, kerr.ErrorForCode(code), kerr.ErrorForCode(s.Code))
		}
		if code := got[good]; code != 0 {
			t.Errorf("%s: the valid batch beside it answered %v", s.Name, kerr.ErrorForCode(code))
		} else {
			acked[value+"-0"] = true
		}
	}
	produceEach("after")
	if missing := e.consumeAll(ctx, topic, acked); len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("kgo: %d of %d acknowledged records not read back (e.g. %v)", len(missing), len(acked), missing[:min(5, len(missing))])
	}
	kcat := kcatKit()
	if why := kcat.unavailable(); why != "" {
		t.Skip(why)
	}
	got, err := kcat.consume(ctx, e.kp.Addr(), topic, len(acked))
	if err != nil {
		t.Fatalf("kcat: %v", err)
	}
	for v := range acked {
		if !slices.Contains(got, v) {
			t.Errorf("kcat did not read back acknowledged %q", v)
		}
	}
}

// rawProduce sends one Produce (acks=all) of records per partition of
// topic and returns each partition's error code.
func rawProduce(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, recs map[int32][]byte) map[int32]int16 {
	t.Helper()
	parts, err := testrig.ProduceRaw(ctx, cl, topic, recs)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int32]int16, len(parts))
	for p, r := range parts {
		out[p] = r.ErrorCode
	}
	return out
}
