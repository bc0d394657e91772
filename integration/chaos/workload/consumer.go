package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/integration/chaos/history"
)

// consumer reads every partition from the start through one proxy and logs
// each poll: the records it returned and the high watermarks it carried.
type consumer struct {
	name string
	via  string
	cfg  Config
	cl   *kgo.Client
}

// newConsumer reads through via; rack, if set, is its client.rack.
func newConsumer(cfg Config, i int, via, rack string) (*consumer, error) {
	parts := map[int32]kgo.Offset{}
	for p := range cfg.Partitions {
		parts[p] = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(via),
		kgo.ClientID(fmt.Sprintf("kchaos-consumer-%d", i)),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: parts}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.DialTimeout(2 * time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
	}
	if rack != "" {
		opts = append(opts, kgo.Rack(rack))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("consumer %d via %s: %w", i, via, err)
	}
	return &consumer{name: fmt.Sprintf("consumer-%d", i), via: via, cfg: cfg, cl: cl}, nil
}

// run polls until ctx ends, then closes the client.
func (c *consumer) run(ctx context.Context) {
	defer c.cl.Close()
	for ctx.Err() == nil {
		inv := c.cfg.Recorder.Invoke(history.Op{Process: c.name, F: history.Poll, Via: c.via})
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := c.cl.PollFetches(pctx)
		cancel()
		out := history.Op{Type: history.OK}
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err != nil {
				if out.Error == "" {
					out.Error = fmt.Sprintf("partition %d: %v", p.Partition, p.Err)
				}
				return
			}
			out.Watermarks = append(out.Watermarks, history.Watermark{Partition: p.Partition, HWM: p.HighWatermark})
			for _, r := range p.Records {
				out.Records = append(out.Records, history.Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			}
		})
		c.cfg.Recorder.Complete(inv, out)
	}
}
