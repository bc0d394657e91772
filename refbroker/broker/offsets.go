package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/refbroker/broker/partlog"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

// Special ListOffsets timestamps.
const (
	offsetLatest         = -1
	offsetEarliest       = -2
	offsetMaxTimestamp   = -3
	offsetEarliestLocal  = -4
	offsetEarliestUpload = -5
)

func (b *Broker) snapshot(tp partlog.TP) *partlog.Snapshot {
	if s, ok := b.view.Get(tp); ok {
		return s
	}
	return &partlog.Snapshot{}
}

// epochAt is the leader epoch that wrote offset (-1 if unknown).
func epochAt(st schema.PartitionState, offset int64) int32 {
	e := int32(-1)
	for _, es := range st.Epochs {
		if es.Start > offset {
			break
		}
		e = es.Epoch
	}
	return e
}

func (b *Broker) handleListOffsets(ctx context.Context, _ *conn, _ header, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = b.listOffset(ctx, partlog.TP{Topic: rt.Topic, Partition: rp.Partition}, rp, &sp)
			if req.Version == 0 && sp.ErrorCode == 0 {
				sp.OldStyleOffsets = []int64{sp.Offset}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *Broker) listOffset(ctx context.Context, tp partlog.TP, rp kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) int16 {
	sp.Offset, sp.Timestamp, sp.LeaderEpoch = -1, -1, -1
	if !b.knowsPartition(ctx, tp) {
		return kerr.UnknownTopicOrPartition.Code
	}
	if code := b.checkLeaderEpoch(tp, rp.CurrentLeaderEpoch); code != 0 {
		return code
	}
	snap := b.snapshot(tp)
	s := snap.State
	var found partlog.Timestamped
	var ok bool
	var err error
	switch rp.Timestamp {
	case offsetEarliest, offsetEarliestLocal:
		found, ok = partlog.Timestamped{Offset: s.LogStart, Timestamp: -1}, true
	case offsetLatest:
		found, ok = partlog.Timestamped{Offset: s.End, Timestamp: -1}, true
	case offsetEarliestUpload:
		return 0 // nothing is pending upload: offset -1
	case offsetMaxTimestamp:
		found, ok, err = partlog.MaxTimestamp(ctx, b.objs, snap)
	default:
		if rp.Timestamp < 0 {
			return kerr.InvalidRequest.Code
		}
		found, ok, err = partlog.ByTimestamp(ctx, b.objs, snap, rp.Timestamp)
	}
	if err != nil {
		b.log.Warn("list offsets by time", "topic", tp.Topic, "partition", tp.Partition, "err", err)
		return kerr.KafkaStorageError.Code
	}
	if !ok {
		return 0
	}
	sp.Offset, sp.Timestamp = found.Offset, found.Timestamp
	if found.Offset == s.End {
		sp.LeaderEpoch = b.meta.epoch(tp)
	} else {
		sp.LeaderEpoch = epochAt(s, found.Offset)
	}
	return 0
}

// handleOffsetForLeaderEpoch answers from the committed epoch history: the
// end offset of the largest epoch <= the requested one.
func (b *Broker) handleOffsetForLeaderEpoch(ctx context.Context, _ *conn, _ header, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			tp := partlog.TP{Topic: rt.Topic, Partition: rp.Partition}
			switch {
			case !b.knowsPartition(ctx, tp):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				if sp.ErrorCode = b.checkLeaderEpoch(tp, rp.CurrentLeaderEpoch); sp.ErrorCode == 0 {
					sp.LeaderEpoch, sp.EndOffset = epochEnd(b.snapshot(tp).State, rp.LeaderEpoch, b.meta.epoch(tp))
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// epochEnd is Kafka's answer for a requested epoch: the largest known
// epoch <= requested and the first offset of the next larger epoch, or the
// log end when requested is the latest (or the current, still unwritten)
// epoch.
func epochEnd(st schema.PartitionState, requested, current int32) (int32, int64) {
	n := len(st.Epochs)
	switch {
	case requested < 0:
		return -1, -1
	case requested == current, n > 0 && requested >= st.Epochs[n-1].Epoch && requested <= current:
		return requested, st.End
	case n == 0 || requested > current:
		return -1, -1
	}
	floor := int32(-1)
	for _, es := range st.Epochs {
		if es.Epoch > requested {
			if floor < 0 {
				return requested, es.Start
			}
			return floor, es.Start
		}
		floor = es.Epoch
	}
	return floor, st.End
}

// handleDeleteRecords advances log start offsets through the partitions'
// appenders (acquiring free partitions; NOT_LEADER_OR_FOLLOWER when another
// broker owns one).
func (b *Broker) handleDeleteRecords(ctx context.Context, _ *conn, _ header, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	type waiting struct {
		sp *kmsg.DeleteRecordsResponseTopicPartition
		ch <-chan partlog.Result
	}
	var waits []waiting
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			sp := &st.Partitions[pi]
			*sp = kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			tp := partlog.TP{Topic: rt.Topic, Partition: rp.Partition}
			if !b.knowsPartition(ctx, tp) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			waits = append(waits, waiting{sp, b.logs.Trim(tp, rp.Offset)})
		}
	}
	for _, w := range waits {
		select {
		case r := <-w.ch:
			w.sp.ErrorCode, w.sp.LowWatermark = r.Code, r.LogStart
		case <-ctx.Done():
			return nil
		}
	}
	return resp
}
