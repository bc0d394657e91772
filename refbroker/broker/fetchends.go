package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/refbroker/broker/partlog"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

// committedEnd reads one partition's end offset from etcd (linearizable); a
// partition with no state has end 0. A fetch past this broker's view asks
// it (see readPartition): the client may have read further elsewhere.
func (b *Broker) committedEnd(ctx context.Context, tp partlog.TP) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := b.cfg.Etcd.Get(ctx, schema.New(b.cfg.Layout).PartitionStateKey(tp.Topic, tp.Partition))
	if err != nil {
		return 0, fmt.Errorf("partition %s/%d state: %w", tp.Topic, tp.Partition, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	var st schema.PartitionState
	if err := layout.Unmarshal(resp.Kvs[0].Value, &st); err != nil {
		return 0, fmt.Errorf("partition %s/%d state: %w", tp.Topic, tp.Partition, err)
	}
	return st.End, nil
}
