package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/internal/kwire/kwiretest"
)

// Record encryption end to end (docs/encryption.md): moto's KMS, stub
// brokers, kproxy with --encryption-config's minimal file.

// produceSync produces rs through cl and fails the test on an error.
func produceSync(t *testing.T, cl *kgo.Client, rs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func TestEncryptionEveryCodecBigRecordTombstone(t *testing.T) {
	p := startEncPool(t, 1, "", "")
	const topic = "secret-codecs"
	p.createTopic(t, topic)
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}}
	want := map[string][]byte{} // by key; nil: a tombstone
	var plain [][]byte
	for _, c := range codecs {
		cl := newClient(t, p.proxies[0], kgo.ProducerBatchCompression(c.codec), kgo.ProducerBatchMaxBytes(16<<20),
			kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		var rs []*kgo.Record
		for i := range 6 {
			k, v := fmt.Sprintf("%s-%d", c.name, i), []byte(fmt.Sprintf("plaintext %s %d %s", c.name, i, strings.Repeat("z", 200)))
			rs = append(rs, &kgo.Record{Key: []byte(k), Value: v, Headers: []kgo.RecordHeader{{Key: "clear", Value: []byte(k)}}})
			want[k], plain = v, append(plain, v)
		}
		big := []byte("plaintext big " + c.name + strings.Repeat(" 2 MiB of it", (2<<20)/12+1))
		tomb := c.name + "-tombstone"
		rs = append(rs, &kgo.Record{Key: []byte(c.name + "-big"), Value: big}, &kgo.Record{Key: []byte(tomb)})
		want[c.name+"-big"], want[tomb] = big, nil
		plain = append(plain, big)
		produceSync(t, cl, rs...)
	}
	got := readAll(t, p.proxies, topic, len(want))
	for _, r := range got {
		w, ok := want[string(r.Key)]
		if !ok || !bytes.Equal(r.Value, w) || (r.Value == nil) != (w == nil) {
			t.Fatalf("consumed %q: value of %d bytes (null %v), want %d bytes (null %v)", r.Key, len(r.Value), r.Value == nil, len(w), w == nil)
		}
		if w != nil && !strings.HasSuffix(string(r.Key), "-big") && (len(r.Headers) != 1 || r.Headers[0].Key != "clear") {
			t.Fatalf("consumed %q with headers %v, want only the producer's", r.Key, r.Headers)
		}
	}
	checkNoPlaintext(t, readAll(t, p.brokers, topic, len(want)), plain)
}

// acks=0 produces are encrypted too: nothing waits for their answer, and
// the proxy gives the encrypted frames back as soon as they are sent.
func TestEncryptionAcksZero(t *testing.T) {
	p := startEncPool(t, 1, "", "")
	const topic = "secret-acks0"
	p.createTopic(t, topic)
	cl := newClient(t, p.proxies[0], kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(topic))
	var plain [][]byte
	for i := range 200 {
		v := fmt.Appendf(nil, "plaintext acks=0 %d %s", i, strings.Repeat("q", 500))
		plain = append(plain, v)
		produceSync(t, cl, &kgo.Record{Value: v})
	}
	got := readAll(t, p.proxies, topic, len(plain))
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Value)] = true
	}
	for _, v := range plain {
		if !seen[string(v)] {
			t.Fatalf("%q not read back", v[:20])
		}
	}
	checkNoPlaintext(t, readAll(t, p.brokers, topic, len(plain)), plain)
}

// fetchPartitions fetches topic's partitions from offset 0 through addr
// with one raw request, and returns each partition's answer.
func fetchPartitions(t *testing.T, addr, topic string, parts ...int32) map[int32]kmsg.FetchResponseTopicPartition {
	t.Helper()
	cl := newClient(t, addr, kgo.MaxVersions(kversion.V3_0_0())) // topics by name
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MaxBytes = 500, 50<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	for _, p := range parts {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = p, 10<<20
		ft.Partitions = append(ft.Partitions, fp)
	}
	req.Topics = append(req.Topics, ft)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch %s via %s: %v", topic, addr, err)
	}
	out := map[int32]kmsg.FetchResponseTopicPartition{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[rp.Partition] = rp
		}
	}
	return out
}

// onlyBatch decodes the one batch of a partition's record data.
func onlyBatch(t *testing.T, data []byte) kmsg.RecordBatch {
	t.Helper()
	var b kmsg.RecordBatch
	if err := b.ReadFrom(data); err != nil {
		t.Fatalf("record batch: %v", err)
	}
	return b
}

func TestEncryptionTamperedPartitionFailsAlone(t *testing.T) {
	p := startEncPool(t, 1, "", "")
	const topic = "secret-tamper"
	p.createTopic(t, topic)
	batch := func(v string) []byte {
		return kwiretest.Batch{ProducerID: -1, LeaderEpoch: -1, FirstTimestamp: time.Now().UnixMilli(), Values: kwiretest.Values(v)}.Encode()
	}
	for part := range int32(2) {
		if code := rawProduce(t, p.proxies[0], topic, part, batch(fmt.Sprintf("plaintext of partition %d", part))); code != 0 {
			t.Fatalf("produce to partition %d: %v", part, kerr.ErrorForCode(code))
		}
	}
	// What a bucket reader who can write would do: take partition 0's
	// stored (encrypted) batch, flip one byte of its value, give it a
	// valid CRC and store it in partition 2.
	stored := fetchPartitions(t, p.brokers[0], topic, 0)[0]
	if stored.ErrorCode != 0 {
		stored = fetchPartitions(t, p.brokers[1], topic, 0)[0]
	}
	sb := onlyBatch(t, stored.RecordBatches)
	var r kmsg.Record
	if err := r.ReadFrom(sb.Records); err != nil || len(r.Value) < 20 || bytes.Contains(r.Value, []byte("plaintext")) {
		t.Fatalf("stored record: %v, value %q", err, r.Value)
	}
	raw := tamperedBatch(r, 5)
	for _, b := range p.brokers {
		if code := rawProduce(t, b, topic, 2, raw); code == 0 {
			break
		}
	}
	ans := fetchPartitions(t, p.proxies[0], topic, 0, 1, 2)
	if c := ans[2].ErrorCode; c != kerr.CorruptMessage.Code || len(ans[2].RecordBatches) != 0 {
		t.Fatalf("tampered partition: code %d with %d record bytes, want CORRUPT_MESSAGE and none", c, len(ans[2].RecordBatches))
	}
	for part := range int32(2) {
		a := ans[part]
		if a.ErrorCode != 0 {
			t.Fatalf("partition %d: %v", part, kerr.ErrorForCode(a.ErrorCode))
		}
		b := onlyBatch(t, a.RecordBatches)
		var got kmsg.Record
		if err := got.ReadFrom(b.Records); err != nil || string(got.Value) != fmt.Sprintf("plaintext of partition %d", part) || len(got.Headers) != 0 {
			t.Fatalf("partition %d: %v %q %v", part, err, got.Value, got.Headers)
		}
	}
}

// tamperedBatch is a batch of r alone with byte flip of its value flipped
// and a valid CRC-32C.
func tamperedBatch(r kmsg.Record, flip int) []byte {
	r.Value = slices.Clone(r.Value)
	r.Value[flip] ^= 0x40
	r.OffsetDelta, r.TimestampDelta64 = 0, 0
	r.Length = int32(len(r.AppendTo(nil)) - 1) // after its own one-byte varint 0
	recs := r.AppendTo(nil)
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, FirstTimestamp: time.Now().UnixMilli(), MaxTimestamp: time.Now().UnixMilli(),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: recs,
	}
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[kwire.BatchOffLength:], uint32(len(out)-kwire.BatchLogOverhead))
	binary.BigEndian.PutUint32(out[kwire.BatchOffCRC:], kwire.BatchCRC(out))
	return out
}
