package broker

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/broker-stub/broker/partlog"
	"github.com/kproxy/kproxy/broker-stub/broker/schema"
	"github.com/kproxy/kproxy/layout"
)

// maxEndReads bounds the reads of one etcd transaction (etcd's default
// --max-txn-ops is 128).
const maxEndReads = 128

// confirmEnds reads, in one etcd round trip per maxEndReads partitions, the
// committed end of every partition of a fetch that this broker does not
// own (see readPartition: a non-owner's view may lag commits the owner
// already reported). A fetch served away from the owners (zone routing)
// would otherwise wait for one linearizable read per partition in turn.
// Partitions whose read failed stay unconfirmed: readPartition reads them
// again alone and answers KAFKA_STORAGE_ERROR if that fails too.
func (b *Broker) confirmEnds(ctx context.Context, parts []*fetchPart) {
	var todo []*fetchPart
	for _, p := range parts {
		if p.bad || p.confirmed {
			continue
		}
		if _, owned := b.sess.Owns(partitionResource(b.cfg.Layout, p.tp)); owned {
			p.committed, p.confirmed = -1, true // an owner's view holds its own commits
			continue
		}
		todo = append(todo, p)
	}
	tps := make([]partlog.TP, 0, min(len(todo), maxEndReads))
	for len(todo) > 0 {
		n := min(len(todo), maxEndReads)
		tps = tps[:0]
		for _, p := range todo[:n] {
			tps = append(tps, p.tp)
		}
		ends, err := b.committedEnds(ctx, tps)
		if err != nil {
			b.log.Debug("fetch: committed ends", "partitions", n, "err", err)
		} else {
			for i, p := range todo[:n] {
				p.committed, p.confirmed = ends[i], true
			}
		}
		todo = todo[n:]
	}
}

// committedEnds reads the partitions' end offsets from etcd in one
// transaction (linearizable); a partition with no state has end 0.
func (b *Broker) committedEnds(ctx context.Context, parts []partlog.TP) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sch := schema.New(b.cfg.Layout)
	ops := make([]clientv3.Op, len(parts))
	for i, tp := range parts {
		ops[i] = clientv3.OpGet(sch.PartitionStateKey(tp.Topic, tp.Partition))
	}
	resp, err := b.cfg.Etcd.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	if len(resp.Responses) != len(parts) {
		return nil, fmt.Errorf("%d answers to %d reads", len(resp.Responses), len(parts))
	}
	ends := make([]int64, len(parts))
	for i, r := range resp.Responses {
		kvs := r.GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue
		}
		var st schema.PartitionState
		if err := layout.Unmarshal(kvs[0].Value, &st); err != nil {
			return nil, fmt.Errorf("partition %s/%d state: %w", parts[i].Topic, parts[i].Partition, err)
		}
		ends[i] = st.End
	}
	return ends, nil
}

// committedEnd reads one partition's end offset from etcd (linearizable).
func (b *Broker) committedEnd(ctx context.Context, tp partlog.TP) (int64, error) {
	ends, err := b.committedEnds(ctx, []partlog.TP{tp})
	if err != nil {
		return 0, err
	}
	return ends[0], nil
}
