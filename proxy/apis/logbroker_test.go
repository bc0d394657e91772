package apis

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/answer"
	"github.com/kproxy/kproxy/proxy/upstream"
)

// logSender is a Sender whose brokers share one in-memory log per
// partition (like stub brokers sharing an object store). Produce appends
// record batches and assigns offsets; Fetch long-polls until data arrives
// or MaxWait passes. It is enough for real clients to produce and consume.
type logSender struct {
	t    testing.TB
	mu   sync.Mutex
	logs map[tp]*plog
	// grew is closed (and replaced) whenever any log grows.
	grew      chan struct{}
	fetchesTo map[int32]int
}

type plog struct {
	batches [][]byte // each starts with its base offset
	next    int64
}

func newLogSender(t testing.TB) *logSender {
	return &logSender{t: t, logs: map[tp]*plog{}, grew: make(chan struct{}), fetchesTo: map[int32]int{}}
}

type donePending struct {
	body []byte
	err  error
}

func (p donePending) Wait(context.Context) ([]byte, error) { return p.body, p.err }
func (p donePending) Release()                             {}

type funcPending func(context.Context) ([]byte, error)

func (f funcPending) Wait(ctx context.Context) ([]byte, error) { return f(ctx) }
func (f funcPending) Release()                                 {}

func (s *logSender) ApiVersions(ctx context.Context, broker int32) ([]kmsg.ApiVersionsResponseApiKey, error) {
	return askApiVersions(ctx, s, broker)
}

func (s *logSender) Send(_ context.Context, broker int32, _ uint64, ur upstream.Request) (Pending, error) {
	key, version, body := ur.Key, ur.Version, ur.Body
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	if err := req.ReadFrom(body.AppendBody(nil)); err != nil {
		return nil, fmt.Errorf("broker %d: decode %s v%d: %w", broker, kmsg.NameForKey(key), version, err)
	}
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		resp := s.produce(r)
		if r.Acks == 0 {
			return donePending{}, nil
		}
		return donePending{body: resp.AppendTo(nil)}, nil
	case *kmsg.FetchRequest:
		s.mu.Lock()
		s.fetchesTo[broker]++
		s.mu.Unlock()
		return funcPending(func(ctx context.Context) ([]byte, error) { return s.fetch(ctx, r) }), nil
	case *kmsg.ListOffsetsRequest:
		return donePending{body: s.listOffsets(r).AppendTo(nil)}, nil
	case *kmsg.InitProducerIDRequest:
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID = 1
		return donePending{body: resp.AppendTo(nil)}, nil
	case *kmsg.ApiVersionsRequest:
		return donePending{body: newFake(s.t).apiVersions(broker, r).AppendTo(nil)}, nil
	}
	return donePending{body: answer.ErrorResponse(req, 0).AppendTo(nil)}, nil
}

func (s *logSender) produce(r *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range r.Topics {
		rt := kmsg.ProduceResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			l := s.log(topicName(t.Topic, t.TopicID, r.Version >= 13), p.Partition)
			rp.BaseOffset = l.next
			for b := p.Records; len(b) >= 61; {
				n := int(binary.BigEndian.Uint32(b[8:12])) + 12
				batch := append([]byte(nil), b[:n]...)
				binary.BigEndian.PutUint64(batch[0:8], uint64(l.next)) // outside the CRC
				l.batches = append(l.batches, batch)
				l.next += int64(binary.BigEndian.Uint32(batch[23:27])) + 1
				b = b[n:]
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	close(s.grew)
	s.grew = make(chan struct{})
	return resp
}

func (s *logSender) log(topic string, p int32) *plog {
	k := tp{topic, p}
	if s.logs[k] == nil {
		s.logs[k] = &plog{}
	}
	return s.logs[k]
}

func (s *logSender) fetch(ctx context.Context, r *kmsg.FetchRequest) ([]byte, error) {
	timer := time.NewTimer(time.Duration(r.MaxWaitMillis) * time.Millisecond)
	defer timer.Stop()
	for {
		s.mu.Lock()
		resp, n := s.fetchNow(r)
		grew := s.grew
		s.mu.Unlock()
		if r.MinBytes <= 0 || n >= max(int(r.MinBytes), 1) {
			return resp.AppendTo(nil), nil
		}
		select {
		case <-grew:
		case <-timer.C:
			return resp.AppendTo(nil), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *logSender) fetchNow(r *kmsg.FetchRequest) (*kmsg.FetchResponse, int) {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	total := 0
	for _, t := range r.Topics {
		name := t.Topic
		if r.Version >= 13 {
			name = nameOf(t.TopicID)
		}
		rt := kmsg.FetchResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			l := s.log(name, p.Partition)
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = p.Partition, l.next, l.next, 0
			rp.PreferredReadReplica = -1
			rp.RecordBatches = []byte{} // as Kafka: empty, never null
			for _, b := range l.batches {
				last := int64(binary.BigEndian.Uint64(b[0:8])) + int64(binary.BigEndian.Uint32(b[23:27]))
				if last >= p.FetchOffset && len(rp.RecordBatches) < int(p.PartitionMaxBytes) {
					rp.RecordBatches = append(rp.RecordBatches, b...)
				}
			}
			total += len(rp.RecordBatches)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, total
}

func (s *logSender) listOffsets(r *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range r.Topics {
		rt := kmsg.ListOffsetsResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p.Partition, 0, 5
			if p.Timestamp == -1 {
				rp.Offset = s.log(t.Topic, p.Partition).next
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
