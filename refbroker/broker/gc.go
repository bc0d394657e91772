package broker

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/lease"
	"github.com/kproxy/kproxy/refbroker/broker/partlog"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
	"github.com/kproxy/kproxy/refbroker/store"
)

// gcPartitionTimeout bounds the collection of one partition.
const gcPartitionTimeout = 30 * time.Second

// collectGarbage periodically deletes, for every partition this broker
// owns, segment objects that no committed segment key references (refused
// commits, trimmed segments) and that are older than GCGrace.
func (b *Broker) collectGarbage(ctx context.Context) {
	t := time.NewTicker(b.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, tp := range b.logs.Owned() {
			if ctx.Err() != nil {
				return
			}
			if _, ok := b.sess.Owns(partitionResource(b.cfg.Layout, tp)); !ok {
				continue
			}
			n, err := b.collectPartition(ctx, tp)
			if err != nil {
				b.log.Warn("segment gc", "topic", tp.Topic, "partition", tp.Partition, "err", err)
			}
			if n > 0 {
				b.log.Info("segment gc", "topic", tp.Topic, "partition", tp.Partition, "deleted", n)
			}
		}
	}
}

// collectPartition runs one bounded collection. References are read from
// etcd after the listing started (on the first question), as CollectGarbage
// requires.
func (b *Broker) collectPartition(ctx context.Context, tp partlog.TP) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, gcPartitionTimeout)
	defer cancel()
	var refs map[string]bool
	var refErr error
	referenced := func(key string) bool {
		if refs == nil && refErr == nil {
			refs, refErr = b.segmentRefs(ctx, tp)
		}
		return refErr != nil || refs[key] // unsure: keep it
	}
	n, err := store.CollectGarbage(ctx, b.cfg.Store, partlog.SegmentPrefix(tp), referenced, b.cfg.GCGrace, time.Now())
	if refErr != nil {
		return n, fmt.Errorf("read segment references: %w", refErr)
	}
	return n, err
}

// segmentRefs reads the objects the partition's committed segment keys
// reference.
func (b *Broker) segmentRefs(ctx context.Context, tp partlog.TP) (map[string]bool, error) {
	s := schema.New(b.cfg.Layout)
	from := s.SegmentKey(tp.Topic, tp.Partition, 0)
	prefix := s.PartitionLogPrefix(tp.Topic, tp.Partition) + "seg/"
	resp, err := b.cfg.Etcd.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)))
	if err != nil {
		return nil, err
	}
	refs := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var seg schema.Segment
		if err := layout.Unmarshal(kv.Value, &seg); err != nil {
			return nil, err
		}
		refs[seg.Object] = true
	}
	return refs, nil
}

// deleteTopicObjects removes the objects of a deleted topic written before
// now (a topic re-created under the same name writes newer ones).
func (b *Broker) deleteTopicObjects(topic string) {
	ctx, cancel := context.WithTimeout(b.runCtx, gcPartitionTimeout)
	defer cancel()
	prefix := fmt.Sprintf("segments/%s/", topic)
	never := func(string) bool { return false }
	if _, err := store.CollectGarbage(ctx, b.cfg.Store, prefix, never, 0, time.Now()); err != nil {
		b.log.Warn("delete objects of deleted topic", "topic", topic, "err", err)
	}
}

func partitionResource(l layout.Layout, tp partlog.TP) lease.Resource {
	return lease.PartitionResource(l, tp.Topic, tp.Partition, schema.New(l).PartitionStateKey(tp.Topic, tp.Partition))
}
