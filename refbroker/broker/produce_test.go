package broker

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func TestProduceValidation(t *testing.T) {
	c := newCluster(t)
	b := c.start(1, func(cfg *Config) { cfg.AutoCreateTopics = false })
	latest := c.clientFor([]string{b.Addr()})
	byName := c.clientFor([]string{b.Addr()}, kgo.MaxVersions(kversion.V3_9_0())) // produce v11: topic names
	c.createTopic(latest, "v", 1)
	ctx := testCtx(t, 30*time.Second)
	good := buildBatch(batchSpec{producerID: -1, values: [][]byte{[]byte("a"), []byte("b")}})
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 0xff
	oldMagic := bytes.Clone(good)
	oldMagic[16] = 1
	truncated := good[:len(good)-3]
	cases := []struct {
		name      string
		cl        *kgo.Client
		topic     string
		partition int32
		records   []byte
		want      int16
	}{
		{"bad crc", latest, "v", 0, badCRC, kerr.CorruptMessage.Code},
		{"good batch then bad crc", latest, "v", 0, append(bytes.Clone(good), badCRC...), kerr.CorruptMessage.Code},
		{"magic 1", byName, "v", 0, oldMagic, kerr.UnsupportedForMessageFormat.Code},
		{"truncated", latest, "v", 0, truncated, kerr.CorruptMessage.Code},
		{"empty", latest, "v", 0, nil, kerr.InvalidRecord.Code},
		{"unknown topic", byName, "nope", 0, good, kerr.UnknownTopicOrPartition.Code},
		{"unknown topic id", latest, "nope", 0, good, kerr.UnknownTopicID.Code},
		{"unknown partition", byName, "v", 7, good, kerr.UnknownTopicOrPartition.Code},
		{"unknown partition by id", latest, "v", 7, good, kerr.UnknownTopicOrPartition.Code},
		{"good", latest, "v", 0, good, 0},
	}
	cl := latest
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := produceRaw(ctx, t, tc.cl, tc.topic, tc.partition, -1, tc.records)
			if got.ErrorCode != tc.want {
				t.Fatalf("error %v, want %v", kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(tc.want))
			}
		})
	}
	// Only the good batch was written.
	if end, code := listOffset(ctx, t, cl, "v", 0, -1); code != 0 || end != 2 {
		t.Fatalf("log end %d (%v), want 2: a refused batch was written", end, kerr.ErrorForCode(code))
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "nope"
	rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: -1, CurrentLeaderEpoch: -1}}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(b.ID())))
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("list offsets of unknown topic: %v %+v", err, resp)
	}
}

func TestFetchOffsetOutOfRange(t *testing.T) {
	c := newCluster(t)
	b := c.start(1, nil)
	cl := c.clientFor([]string{b.Addr()})
	c.createTopic(cl, "o", 1)
	ctx := testCtx(t, 30*time.Second)
	rp := produceRaw(ctx, t, cl, "o", 0, -1, buildBatch(batchSpec{producerID: -1, values: [][]byte{[]byte("x"), []byte("y"), []byte("z")}}))
	if rp.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(rp.ErrorCode))
	}
	cases := []struct {
		offset int64
		want   int16
	}{
		{0, 0}, {2, 0}, {3, 0}, {4, kerr.OffsetOutOfRange.Code}, {1000, kerr.OffsetOutOfRange.Code}, {-1, kerr.OffsetOutOfRange.Code},
	}
	for _, tc := range cases {
		p := fetchRaw(ctx, t, cl, "o", 0, tc.offset)
		if p.ErrorCode != tc.want {
			t.Errorf("fetch at %d: %v, want %v", tc.offset, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(tc.want))
		}
		if p.ErrorCode == 0 && p.HighWatermark != 3 {
			t.Errorf("fetch at %d: high watermark %d, want 3", tc.offset, p.HighWatermark)
		}
	}
}

func TestAcksZero(t *testing.T) {
	c := newCluster(t)
	c.start(1, nil)
	cl := c.client(kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	c.createTopic(cl, "zero", 2)
	const n = 100
	produceN(t, cl, "zero", 2, 0, n)
	recs := consumeN(t, c, "zero", n)
	if len(recs) != n {
		t.Fatalf("consumed %d records, want %d", len(recs), n)
	}
}

func TestListOffsetsByTimestamp(t *testing.T) {
	c := newCluster(t)
	b := c.start(1, nil)
	cl := c.clientFor([]string{b.Addr()})
	c.createTopic(cl, "ts", 1)
	ctx := testCtx(t, 30*time.Second)
	for i, ts := range []int64{1000, 2000, 3000} {
		rp := produceRaw(ctx, t, cl, "ts", 0, -1, buildBatch(batchSpec{producerID: -1, timestamp: ts,
			values: [][]byte{binary.BigEndian.AppendUint32(nil, uint32(i)), []byte("second")}}))
		if rp.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(rp.ErrorCode))
		}
	}
	cases := []struct {
		ts, want int64
	}{
		{-2, 0}, {-1, 6}, {0, 0}, {1000, 0}, {1500, 2}, {3000, 4}, {3001, -1}, {-3, 4},
	}
	for _, tc := range cases {
		got, code := listOffset(ctx, t, cl, "ts", 0, tc.ts)
		if code != 0 || got != tc.want {
			t.Errorf("list offsets at %d: %d (%v), want %d", tc.ts, got, kerr.ErrorForCode(code), tc.want)
		}
	}
}

// A transactional producer gets a clear error at once instead of hanging.
func TestTransactionsFailFast(t *testing.T) {
	c := newCluster(t)
	c.start(1, nil)
	cl := c.client(kgo.TransactionalID("txn"), kgo.DefaultProduceTopic("tx"))
	c.createTopic(cl, "tx", 1)
	ctx := testCtx(t, 20*time.Second)
	start := time.Now()
	err := cl.BeginTransaction()
	if err == nil {
		err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr()
	}
	if err == nil {
		t.Fatal("transactional produce succeeded")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("transactional produce failed only after %v: %v", took, err)
	}
	t.Logf("transactional produce: %v", err)
}
