package apis

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/routing"
)

// cannedSender answers every request to a broker with a fixed body,
// without decoding: it measures the dispatcher, not the fake.
type cannedSender struct {
	answers map[int32]*canned
	frame   []byte // what a real Sender would write (Send encodes into it)
}

type canned struct{ body []byte }

func (c *canned) Wait(context.Context) ([]byte, error) { return c.body, nil }
func (c *canned) Release()                             {} // shared by every request

func (s *cannedSender) ApiVersions(context.Context, int32) ([]kmsg.ApiVersionsResponseApiKey, error) {
	return nil, nil
}

func (s *cannedSender) Send(_ context.Context, broker int32, _ uint64, req upstream.Request) (Pending, error) {
	s.frame = req.Body.AppendBody(s.frame[:0])
	return s.answers[broker], nil
}

// benchProduce builds a produce of parts of topic "t" (1 KiB of records
// each) and the canned answers of the brokers that own them.
func benchProduce(b testing.TB, parts []int32) (*Dispatcher, []byte) {
	return benchProduceOn(b, testTable(), parts, 1024)
}

// benchProduceOn is benchProduce on table rt with size bytes of records per
// partition; rt's owners must follow owner().
func benchProduceOn(b testing.TB, rt *routing.Table, parts []int32, size int) (*Dispatcher, []byte) {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	topic := kmsg.ProduceRequestTopic{Topic: "t"}
	for _, p := range parts {
		topic.Partitions = append(topic.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p, Records: make([]byte, size)})
	}
	req.Topics = []kmsg.ProduceRequestTopic{topic}
	f := newFake(b)
	s := &cannedSender{answers: map[int32]*canned{}}
	for broker := int32(1); broker <= 3; broker++ {
		sub := kmsg.NewPtrProduceRequest()
		sub.Version = req.Version
		st := kmsg.ProduceRequestTopic{Topic: "t"}
		for _, p := range parts {
			if owner("t", p) == broker {
				st.Partitions = append(st.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p})
			}
		}
		sub.Topics = []kmsg.ProduceRequestTopic{st}
		s.answers[broker] = &canned{body: f.okResponse(broker, sub).AppendTo(nil)}
	}
	cfg := testConfig(rt, f)
	cfg.Sender = s
	d, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return d, req.AppendTo(nil)
}

func runProduce(b *testing.B, d *Dispatcher, body []byte) {
	ctx := context.Background()
	h := Header{Key: int16(kmsg.Produce), Version: 9}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		reply, err := d.Begin(ctx, 1, h, body).Finish(ctx)
		if err != nil || len(replyBytes(reply)) == 0 {
			b.Fatalf("reply %d bytes, err %v", len(replyBytes(reply)), err)
		}
	}
}

// BenchmarkProduceSplit16x3: 16 partitions owned by 3 brokers.
func BenchmarkProduceSplit16x3(b *testing.B) {
	parts := make([]int32, 16)
	for i := range parts {
		parts[i] = int32(i)
	}
	d, body := benchProduce(b, parts)
	runProduce(b, d, body)
}

// BenchmarkProduceSingleBroker: 6 partitions all owned by broker 1 (the
// body and the answer pass unchanged).
func BenchmarkProduceSingleBroker(b *testing.B) {
	d, body := benchProduce(b, []int32{0, 3, 6, 9, 12, 15})
	runProduce(b, d, body)
}

// benchFetch builds a fetch (v12) of parts of topic "t" and canned answers
// with 1 KiB of records per partition.
func benchFetch(b *testing.B, parts []int32) (*Dispatcher, []byte) {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MinBytes = 12, 500, 1
	topic := kmsg.FetchRequestTopic{Topic: "t"}
	for _, p := range parts {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = p, 1<<20
		topic.Partitions = append(topic.Partitions, fp)
	}
	req.Topics = []kmsg.FetchRequestTopic{topic}
	f := newFake(b)
	s := &cannedSender{answers: map[int32]*canned{}}
	for broker := int32(1); broker <= 3; broker++ {
		sub := kmsg.NewPtrFetchRequest()
		sub.Version = req.Version
		st := kmsg.FetchRequestTopic{Topic: "t"}
		for _, p := range parts {
			if owner("t", p) == broker {
				st.Partitions = append(st.Partitions, kmsg.FetchRequestTopicPartition{Partition: p})
			}
		}
		sub.Topics = []kmsg.FetchRequestTopic{st}
		resp := f.okResponse(broker, sub).(*kmsg.FetchResponse)
		for i := range resp.Topics[0].Partitions {
			resp.Topics[0].Partitions[i].RecordBatches = make([]byte, 1024)
		}
		s.answers[broker] = &canned{body: resp.AppendTo(nil)}
	}
	cfg := testConfig(testTable(), f)
	cfg.Sender = s
	d, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return d, req.AppendTo(nil)
}

func runFetch(b *testing.B, d *Dispatcher, body []byte) {
	ctx := context.Background()
	h := Header{Key: int16(kmsg.Fetch), Version: 12}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		reply, err := d.Begin(ctx, 1, h, body).Finish(ctx)
		if err != nil || len(replyBytes(reply)) == 0 {
			b.Fatalf("reply %d bytes, err %v", len(replyBytes(reply)), err)
		}
	}
}

// BenchmarkFetchSplit16x3: 16 partitions on 3 brokers, all with data.
func BenchmarkFetchSplit16x3(b *testing.B) {
	parts := make([]int32, 16)
	for i := range parts {
		parts[i] = int32(i)
	}
	d, body := benchFetch(b, parts)
	runFetch(b, d, body)
}

// BenchmarkFetchSingleBroker: 6 partitions on broker 1 (answer unchanged).
func BenchmarkFetchSingleBroker(b *testing.B) {
	d, body := benchFetch(b, []int32{0, 3, 6, 9, 12, 15})
	runFetch(b, d, body)
}
