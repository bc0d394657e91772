package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EnsureTopic creates topic with partitions through the proxy at addr (or
// accepts it if it exists) and waits until Metadata shows every partition
// with a leader, retrying until ctx ends.
func EnsureTopic(ctx context.Context, addr, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(3))
	if err != nil {
		return fmt.Errorf("client for %s: %w", addr, err)
	}
	defer cl.Close()
	var last error
	for attempt := 0; ; attempt++ {
		if last = createTopic(ctx, cl, topic, partitions); last == nil {
			if last = checkTopic(ctx, cl, topic, partitions); last == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ensure topic %s via %s after %d attempts: %w (last: %v)", topic, addr, attempt+1, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func createTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = topic
	t.NumPartitions = partitions
	t.ReplicationFactor = -1
	req.Topics = append(req.Topics, t)
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for _, rt := range resp.Topics {
		err := kerr.ErrorForCode(rt.ErrorCode)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	return nil
}

func checkTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, mt)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return fmt.Errorf("metadata for %s: %w", topic, err)
	}
	if len(resp.Topics) == 0 { // one topic asked, so at most one answered
		return fmt.Errorf("metadata has no topic %s", topic)
	}
	t := resp.Topics[0]
	if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
		return fmt.Errorf("metadata for %s: %w", topic, err)
	}
	if int32(len(t.Partitions)) != partitions {
		return fmt.Errorf("topic %s has %d partitions, want %d", topic, len(t.Partitions), partitions)
	}
	return nil
}
