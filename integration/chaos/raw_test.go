package chaos

import (
	"context"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/kwire/kwiretest"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kproxy/kproxy/integration/chaos/history"
)

// direct talks to one broker (or proxy) only: requests go to that address
// whatever its metadata says, the way a client behind a round-robin proxy
// lands on a broker that does not own the partition.
type direct struct {
	addr string
	cl   *kgo.Client
	b    *kgo.Broker
}

func dialDirect(t *testing.T, addr string) *direct {
	t.Helper()
	// Versions up to Kafka 3.0 keep topic names (not ids) in Produce and Fetch.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.MaxVersions(kversion.V3_0_0()),
		kgo.DialTimeout(2*time.Second), kgo.RequestRetries(0))
	if err != nil {
		t.Fatalf("client for %s: %v", addr, err)
	}
	t.Cleanup(cl.Close)
	return &direct{addr: addr, cl: cl, b: cl.SeedBrokers()[0]}
}

// recordBatch encodes values as one magic-2 record batch (no compression,
// no producer id).
func recordBatch(values ...string) []byte {
	return kwiretest.Batch{ProducerID: -1, FirstTimestamp: time.Now().UnixMilli(), LeaderEpoch: -1,
		Values: kwiretest.Values(values...)}.Encode()
}

// produce sends one request with values to partition p and returns the base
// offset and the partition's error code; err is a transport error.
func (d *direct) produce(ctx context.Context, topic string, p int32, values ...string) (int64, int16, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = recordBatch(values...)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	kresp, err := d.b.Request(rctx, req)
	if err != nil {
		return -1, 0, fmt.Errorf("produce to %s: %w", d.addr, err)
	}
	resp := kresp.(*kmsg.ProduceResponse)
	for _, t := range resp.Topics {
		for _, part := range t.Partitions {
			if part.Partition == p {
				return part.BaseOffset, part.ErrorCode, nil
			}
		}
	}
	return -1, 0, fmt.Errorf("produce to %s: no answer for partition %d", d.addr, p)
}

// send is produce logged in a history as one send per value: ok with
// offsets, fail on NOT_LEADER_OR_FOLLOWER (definitely not written), info
// otherwise.
func (d *direct) send(ctx context.Context, rec *history.Recorder, proc, topic string, p int32, seq int64, value string) (int64, int16, error) {
	inv := rec.Invoke(history.Op{Process: proc, F: history.Send, Value: value, Partition: p, Seq: seq, Via: d.addr})
	base, code, err := d.produce(ctx, topic, p, value)
	out := history.Op{Type: history.Info}
	switch {
	case err != nil:
		out.Error = err.Error()
	case code == 0:
		out = history.Op{Type: history.OK, Partition: p, Offset: base}
	case code == kerr.NotLeaderForPartition.Code:
		out = history.Op{Type: history.Fail, Error: kerr.ErrorForCode(code).Error()}
	default:
		out.Error = kerr.ErrorForCode(code).Error()
	}
	rec.Complete(inv, out)
	return base, code, err
}

// fetch reads partition p from offset at the connected address.
func (d *direct) fetch(ctx context.Context, topic string, p int32, offset int64) ([]history.Record, int16, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = p
	rp.FetchOffset = offset
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kresp, err := d.b.Request(rctx, req)
	if err != nil {
		return nil, 0, fmt.Errorf("fetch from %s: %w", d.addr, err)
	}
	resp := kresp.(*kmsg.FetchResponse)
	for _, t := range resp.Topics {
		for _, part := range t.Partitions {
			if part.Partition != p {
				continue
			}
			if part.ErrorCode != 0 {
				return nil, part.ErrorCode, nil
			}
			var out []history.Record
			for _, r := range decodeRecords(part.RecordBatches) {
				out = append(out, history.Record{Partition: p, Offset: r.Offset, Value: string(r.Value)})
			}
			return out, 0, nil
		}
	}
	return nil, 0, fmt.Errorf("fetch from %s: no answer for partition %d", d.addr, p)
}

// decodeRecords reads uncompressed magic-2 batches.
func decodeRecords(raw []byte) []kgo.Record {
	var out []kgo.Record
	for len(raw) >= 12 {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil {
			return out
		}
		n := int(b.Length) + 12
		if n > len(raw) {
			return out
		}
		raw = raw[n:]
		recs := b.Records
		for range b.NumRecords {
			var r kmsg.Record
			if err := r.ReadFrom(recs); err != nil {
				break
			}
			size := int(r.Length) + varintLen(r.Length)
			recs = recs[size:]
			out = append(out, kgo.Record{Offset: b.FirstOffset + int64(r.OffsetDelta), Value: r.Value})
		}
	}
	return out
}

func varintLen(v int32) int {
	u := uint32(v<<1) ^ uint32(v>>31) // zigzag
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func TestRecordBatchRoundTrip(t *testing.T) {
	raw := recordBatch("a", "bb", "ccc")
	var b kmsg.RecordBatch
	if err := b.ReadFrom(raw); err != nil {
		t.Fatal(err)
	}
	if int(b.Length)+12 != len(raw) || b.NumRecords != 3 {
		t.Fatalf("length %d (raw %d), records %d", b.Length, len(raw), b.NumRecords)
	}
	if got := int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))); got != b.CRC {
		t.Fatalf("crc %d, want %d", b.CRC, got)
	}
	b.FirstOffset = 40
	recs := decodeRecords(b.AppendTo(nil))
	if len(recs) != 3 || string(recs[2].Value) != "ccc" || recs[2].Offset != 42 {
		t.Fatalf("decoded %+v", recs)
	}
}

// TestDirectAgainstKfake checks the raw helpers against franz-go's fake
// Kafka: what produce writes, fetch returns at the acknowledged offsets.
func TestDirectAgainstKfake(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := dialDirect(t, fake.ListenAddrs()[0])
	for i, vals := range [][]string{{"a", "b"}, {"c"}} {
		base, code, err := d.produce(ctx, "t", 1, vals...)
		if err != nil || code != 0 || base != int64(2*i) {
			t.Fatalf("produce %v: base %d code %d err %v", vals, base, code, err)
		}
	}
	recs, code, err := d.fetch(ctx, "t", 1, 1)
	if err != nil || code != 0 {
		t.Fatalf("fetch: code %d err %v", code, err)
	}
	if len(recs) != 2 || recs[0].Offset != 1 || recs[0].Value != "b" || recs[1].Value != "c" {
		// A fetch may return the whole batch holding the offset: accept a, b, c too.
		if len(recs) != 3 || recs[1].Value != "b" || recs[2].Offset != 2 {
			t.Fatalf("fetched %+v", recs)
		}
	}
	if _, code, _ := d.produce(ctx, "t", 7, "x"); code == 0 {
		t.Fatal("produce to a partition that does not exist succeeded")
	}
}
