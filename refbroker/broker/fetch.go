package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/refbroker/broker/partlog"
)

// fetchPart is one requested partition and where its answer goes.
type fetchPart struct {
	tp   partlog.TP
	req  kmsg.FetchRequestTopicPartition
	resp *kmsg.FetchResponseTopicPartition
	bad  bool // answered with an error that no wait can change
	// endChecked: an offset past the view's end was confirmed in etcd to be
	// within the committed log (this broker's view lags).
	endChecked bool
	checkedEnd int64 // the committed end that check found
	synced     bool  // the metadata view was synced with etcd for this fetch
}

// handleFetch serves committed data of any partition, owned here or not,
// from the committed view and the segment objects. Fetch sessions are not
// kept: the session id is always 0, so clients send full fetches. It never
// creates an appender.
func (b *Broker) handleFetch(ctx context.Context, _ *conn, _ header, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.FetchRequest)
	b.metrics.fetchRequest()
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	parts := b.fetchLayout(req, resp)
	if req.SessionID > 0 || req.SessionEpoch > 0 {
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code // sessions are never created here
		resp.Topics = nil
		return resp
	}
	maxBytes := int(req.MaxBytes)
	if req.Version < 3 || maxBytes <= 0 {
		maxBytes = int(b.cfg.MaxFrameBytes)
	}
	var tps []partlog.TP
	for _, p := range parts {
		tps = append(tps, p.tp)
	}
	wake := make(chan struct{}, 1)
	cancel := b.view.Wait(tps, wake) // before the first read: no change is missed
	defer cancel()
	timer := time.NewTimer(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	defer timer.Stop()
	for {
		total, errored := b.fillFetch(ctx, parts, maxBytes)
		if errored || total >= int(req.MinBytes) || req.MaxWaitMillis <= 0 {
			b.metrics.fetchServed(req.Rack, b.cfg.Rack, resp)
			return resp
		}
		select {
		case <-wake:
		case <-timer.C:
			b.fillFetch(ctx, parts, maxBytes)
			b.metrics.fetchServed(req.Rack, b.cfg.Rack, resp)
			return resp
		case <-ctx.Done():
			return nil
		}
	}
}

// fetchLayout builds the response skeleton in request order.
func (b *Broker) fetchLayout(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) []*fetchPart {
	var parts []*fetchPart
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		name, topicCode := rt.Topic, int16(0)
		if req.Version >= 13 {
			if t, ok := b.meta.topicByID(rt.TopicID); ok {
				name = t.info.Name
			} else {
				topicCode = kerr.UnknownTopicID.Code
			}
		}
		st.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			sp := &st.Partitions[pi]
			*sp = kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			p := &fetchPart{tp: partlog.TP{Topic: name, Partition: rp.Partition}, req: rp, resp: sp}
			if topicCode != 0 {
				sp.ErrorCode, p.bad = topicCode, true
			}
			parts = append(parts, p)
		}
	}
	return parts
}

// fillFetch (re)reads every partition; it reports the bytes gathered and
// whether some partition has an error (which answers at once).
func (b *Broker) fillFetch(ctx context.Context, parts []*fetchPart, maxBytes int) (int, bool) {
	total, errored := 0, false
	for _, p := range parts {
		if p.bad {
			errored = true
			continue
		}
		p.resp.RecordBatches = nil
		code := b.readPartition(ctx, p, maxBytes-total, total == 0)
		if p.resp.RecordBatches == nil {
			// Null batches encode as length -1, which librdkafka rejects
			// ("invalid MessageSetSize -1"); an empty partition is empty.
			p.resp.RecordBatches = []byte{}
		}
		p.resp.ErrorCode = code
		if code != 0 {
			errored = true
			continue
		}
		total += len(p.resp.RecordBatches)
	}
	return total, errored
}

func (b *Broker) readPartition(ctx context.Context, p *fetchPart, budget int, first bool) int16 {
	sp := p.resp
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
	if !b.meta.partitionExists(p.tp) {
		if p.synced {
			return kerr.UnknownTopicOrPartition.Code
		}
		p.synced = true // once per fetch: a long poll re-reads on every wake
		if err := b.syncTopic(ctx, p.tp.Topic); err != nil || !b.meta.partitionExists(p.tp) {
			return kerr.UnknownTopicOrPartition.Code
		}
	}
	if code := b.checkLeaderEpoch(p.tp, p.req.CurrentLeaderEpoch); code != 0 {
		return code
	}
	snap, ok := b.view.Get(p.tp)
	if !ok {
		snap = &partlog.Snapshot{}
	}
	st := snap.State
	// A broker that does not own the partition learns of the owner's
	// commits through its watch, so its high watermark trails the owner's,
	// as a Kafka follower's does (KIP-392): never beyond the committed end.
	// The proxy keeps what a client sees from going down when its fetches
	// move between brokers (proxy/apis/hwfloor). An owner's view holds its
	// own commits as they are made, and what it read when it acquired the
	// partition is its floor.
	floor := b.view.Floor(p.tp)
	hwm := max(st.End, floor)
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = hwm, hwm, st.LogStart
	off := p.req.FetchOffset
	if off > st.End && !p.endChecked {
		// The client may have read further at another broker: only etcd
		// may say the offset is really past the end.
		end := floor
		if off > end {
			var err error
			if end, err = b.committedEnd(ctx, p.tp); err != nil {
				return kerr.KafkaStorageError.Code
			}
		}
		if off > end {
			return kerr.OffsetOutOfRange.Code
		}
		p.endChecked, p.checkedEnd = true, end
	}
	if p.endChecked && p.checkedEnd > hwm {
		hwm = p.checkedEnd // confirmed committed: ahead of the view, never beyond the end
		sp.HighWatermark, sp.LastStableOffset = hwm, hwm
	}
	if off < st.LogStart || off > st.End {
		if p.endChecked && off > st.End {
			return 0 // committed but not yet seen here: wait for the view
		}
		return kerr.OffsetOutOfRange.Code
	}
	limit := min(int(p.req.PartitionMaxBytes), budget)
	if limit <= 0 && !first {
		return 0
	}
	data, err := partlog.Read(ctx, b.objs, snap, off, limit, first)
	if err != nil && len(data) == 0 {
		if errors.Is(err, context.Canceled) {
			return 0
		}
		b.log.Warn("fetch read failed", "topic", p.tp.Topic, "partition", p.tp.Partition, "offset", off, "err", err)
		return kerr.KafkaStorageError.Code
	}
	sp.RecordBatches = data
	return 0
}

// checkLeaderEpoch compares a client's current leader epoch (-1: none)
// with the partition's.
func (b *Broker) checkLeaderEpoch(tp partlog.TP, clientEpoch int32) int16 {
	if clientEpoch < 0 {
		return 0
	}
	switch cur := b.meta.epoch(tp); {
	case clientEpoch < cur:
		return kerr.FencedLeaderEpoch.Code
	case clientEpoch > cur:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}
