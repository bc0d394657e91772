package broker

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/kwire/kwiretest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchSpec describes a hand-built record batch.
type batchSpec struct {
	producerID    int64 // -1: not idempotent
	producerEpoch int16
	firstSeq      int32
	values        [][]byte
	timestamp     int64
}

// buildBatch encodes a magic-2 batch with a correct CRC-32C.
func buildBatch(s batchSpec) []byte {
	ts := s.timestamp
	if ts == 0 {
		ts = time.Now().UnixMilli()
	}
	return kwiretest.Batch{
		ProducerID: s.producerID, ProducerEpoch: s.producerEpoch, FirstSequence: s.firstSeq,
		FirstTimestamp: ts, LeaderEpoch: -1, Values: s.values,
	}.Encode()
}

// produceRaw sends one produce request for one partition and returns the
// partition's answer.
func produceRaw(ctx context.Context, t *testing.T, cl kmsg.Requestor, topic string, partition int32, acks int16, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, maybeTopicID(ctx, t, cl, topic)
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce to %s/%d: %v", topic, partition, err)
	}
	return resp.Topics[0].Partitions[0]
}

// produceUntilLeader retries a produce while the broker answers
// NOT_LEADER_OR_FOLLOWER (a predecessor's lease has not expired yet).
func produceUntilLeader(ctx context.Context, t *testing.T, cl kmsg.Requestor, topic string, partition int32, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	for {
		rp := produceRaw(ctx, t, cl, topic, partition, -1, records)
		if rp.ErrorCode != kerr.NotLeaderForPartition.Code && rp.ErrorCode != kerr.RequestTimedOut.Code {
			return rp
		}
		select {
		case <-ctx.Done():
			t.Fatalf("still not leader of %s/%d: %v", topic, partition, kerr.ErrorForCode(rp.ErrorCode))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// maybeTopicID is the topic's id, or zero for an unknown topic.
func maybeTopicID(ctx context.Context, t *testing.T, cl kmsg.Requestor, topic string) [16]byte {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata for %s: %v", topic, err)
	}
	return resp.Topics[0].TopicID
}

// listOffset asks one broker for a partition's offset at ts (-1 latest,
// -2 earliest).
func listOffset(ctx context.Context, t *testing.T, cl kmsg.Requestor, topic string, partition int32, ts int64) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// fetchRaw fetches one partition from offset without waiting.
func fetchRaw(ctx context.Context, t *testing.T, cl kmsg.Requestor, topic string, partition int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = topicID(ctx, t, cl, topic)
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	return resp.Topics[0].Partitions[0]
}

// readAll reads a partition from offset 0 up to its high watermark through
// one broker and returns the records in order.
func readAll(ctx context.Context, t *testing.T, cl kmsg.Requestor, topic string, partition int32) []kmsg.Record {
	t.Helper()
	return readPartitionFrom(ctx, t, cl, topic, partition, 0)
}

// readFrom reads partition 0 from offset up to its high watermark.
func readFrom(ctx context.Context, t *testing.T, cl kmsg.Requestor, topic string, offset int64) []kmsg.Record {
	t.Helper()
	return readPartitionFrom(ctx, t, cl, topic, 0, offset)
}

func readPartitionFrom(ctx context.Context, t *testing.T, cl kmsg.Requestor, topic string, partition int32, from int64) []kmsg.Record {
	t.Helper()
	var out []kmsg.Record
	for off := from; ; {
		p := fetchRaw(ctx, t, cl, topic, partition, off)
		if p.ErrorCode != 0 {
			t.Fatalf("fetch %s/%d at %d: %v", topic, partition, off, kerr.ErrorForCode(p.ErrorCode))
		}
		if off >= p.HighWatermark {
			return out
		}
		n := len(out)
		for _, r := range decodeRecords(t, p.RecordBatches) {
			if r.OffsetDelta >= 0 && int64(r.OffsetDelta) >= off { // OffsetDelta holds the absolute offset here
				out = append(out, r)
				off = int64(r.OffsetDelta) + 1
			}
		}
		if len(out) == n {
			t.Fatalf("fetch %s/%d at %d below high watermark %d returned no records", topic, partition, off, p.HighWatermark)
		}
	}
}

// decodeRecords decodes uncompressed batches; each record's OffsetDelta is
// replaced by its absolute offset.
func decodeRecords(t *testing.T, data []byte) []kmsg.Record {
	t.Helper()
	var out []kmsg.Record
	for len(data) > 0 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(data); err != nil {
			t.Fatalf("decode batch: %v", err)
		}
		size := int(b.Length) + 12
		if crc32.Checksum(data[21:size], crc32.MakeTable(crc32.Castagnoli)) != uint32(b.CRC) {
			t.Fatalf("batch at offset %d: CRC mismatch", b.FirstOffset)
		}
		data = data[size:]
		recs := b.Records
		for i := int32(0); i < b.NumRecords; i++ {
			l, n := binary.Varint(recs)
			var r kmsg.Record
			if err := r.ReadFrom(recs[:n+int(l)]); err != nil {
				t.Fatalf("decode record: %v", err)
			}
			r.OffsetDelta = int32(b.FirstOffset) + r.OffsetDelta
			out = append(out, r)
			recs = recs[n+int(l):]
		}
	}
	return out
}
