package compat

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchInfo is the header of one stored record batch, as a raw fetch returns
// it: what the checks need to see that batches are kept as sent.
type batchInfo struct {
	partition     int32
	baseOffset    int64
	records       int32
	magic         int8
	codec         codec
	producerID    int64
	firstSequence int32
}

// fetchBatches reads every stored batch of topic with raw Fetch requests
// (kmsg through a kgo client, each partition from its leader) and returns
// the batch headers, without decompressing anything.
func fetchBatches(ctx context.Context, bootstrap []string, topic string) ([]batchInfo, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		return nil, fmt.Errorf("raw fetch %s: client: %w", topic, err)
	}
	defer cl.Close()
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	meta, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("raw fetch %s: metadata: %w", topic, err)
	}
	if len(meta.Topics) != 1 {
		return nil, fmt.Errorf("raw fetch %s: metadata has %d topics", topic, len(meta.Topics))
	}
	mtopic := meta.Topics[0]
	var out []batchInfo
	for _, p := range mtopic.Partitions {
		bs, err := fetchPartitionBatches(ctx, cl, topic, mtopic.TopicID, p.Partition, p.Leader)
		if err != nil {
			return nil, err
		}
		out = append(out, bs...)
	}
	return out, nil
}

func fetchPartitionBatches(ctx context.Context, cl *kgo.Client, topic string, id [16]byte, partition, leader int32) ([]batchInfo, error) {
	var out []batchInfo
	offset := int64(0)
	for round := 0; round < 1000; round++ {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 50
		req.MaxBytes = 8 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 4<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("raw fetch %s/%d@%d: %w", topic, partition, offset, err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, fmt.Errorf("raw fetch %s/%d@%d: %w", topic, partition, offset, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return nil, fmt.Errorf("raw fetch %s/%d@%d: malformed response shape", topic, partition, offset)
		}
		rp0 := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rp0.ErrorCode); err != nil {
			return nil, fmt.Errorf("raw fetch %s/%d@%d: %w", topic, partition, offset, err)
		}
		bs, next := parseBatches(partition, rp0.RecordBatches)
		out = append(out, bs...)
		if next > offset {
			offset = next
		}
		if offset >= rp0.HighWatermark || len(bs) == 0 {
			return out, nil
		}
	}
	return nil, fmt.Errorf("raw fetch %s/%d: no end after 1000 fetches", topic, partition)
}

// parseBatches splits raw fetch bytes into batch headers, stopping at a
// truncated trailing batch, and returns the offset after the last one.
func parseBatches(partition int32, raw []byte) ([]batchInfo, int64) {
	var out []batchInfo
	next := int64(-1)
	for len(raw) >= 12 {
		length := int32(binary.BigEndian.Uint32(raw[8:12]))
		end := 12 + int(length)
		if length < 0 || end > len(raw) {
			break
		}
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw[:end]); err != nil {
			break
		}
		out = append(out, batchInfo{
			partition:     partition,
			baseOffset:    b.FirstOffset,
			records:       b.NumRecords,
			magic:         b.Magic,
			codec:         codecFromAttrs(b.Attributes),
			producerID:    b.ProducerID,
			firstSequence: b.FirstSequence,
		})
		next = b.FirstOffset + int64(b.LastOffsetDelta) + 1
		raw = raw[end:]
	}
	return out, next
}

// checkBatchCodec checks that every stored batch is a v2 batch with codec c.
func checkBatchCodec(batches []batchInfo, c codec) error {
	if len(batches) == 0 {
		return fmt.Errorf("raw fetch returned no batches")
	}
	for _, b := range batches {
		if b.magic != 2 || b.codec != c {
			return fmt.Errorf("stored batch p%d@%d: magic %d codec %s; the client was asked for %s",
				b.partition, b.baseOffset, b.magic, b.codec, c)
		}
	}
	return nil
}

// checkIdempotentBatches checks that every stored batch carries a producer
// id and that sequence numbers run without gaps or repeats per partition.
func checkIdempotentBatches(batches []batchInfo) error {
	if len(batches) == 0 {
		return fmt.Errorf("raw fetch returned no batches")
	}
	type seqKey struct {
		partition int32
		producer  int64
	}
	nextSeq := make(map[seqKey]int32)
	for _, b := range batches {
		if b.producerID < 0 || b.firstSequence < 0 {
			return fmt.Errorf("stored batch p%d@%d: producer id %d, sequence %d: not idempotent",
				b.partition, b.baseOffset, b.producerID, b.firstSequence)
		}
		k := seqKey{b.partition, b.producerID}
		if want, ok := nextSeq[k]; ok && b.firstSequence != want {
			return fmt.Errorf("stored batch p%d@%d: sequence %d, want %d",
				b.partition, b.baseOffset, b.firstSequence, want)
		}
		nextSeq[k] = b.firstSequence + b.records
	}
	return nil
}
