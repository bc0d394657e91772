package compat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// target is the cluster a client under test talks to.
type target interface {
	// bootstrap is what clients are pointed at.
	bootstrap() []string
	// advertised is every address metadata may legitimately name.
	advertised() []string
	// killOwner abruptly stops the broker that owns topic/partition and
	// returns its id.
	killOwner(ctx context.Context, topic string, partition int32) (int32, error)
	// strandOwner makes the owner of topic/partition vanish and a broker
	// that is not live take it; release frees the partition again.
	strandOwner(ctx context.Context, topic string, partition int32) (release func(context.Context) error, err error)
	// secure is the target's SASL_SSL listener, or nil.
	secure() *secureTarget
	close()
}

// targetKind picks the cluster implementation; see the package doc.
type targetKind struct {
	name     string
	describe string
	// start starts a cluster; it writes its own log (warnings and worse)
	// to logs.
	start func(ctx context.Context, logs io.Writer) (target, error)
}

func chooseTarget() (targetKind, error) {
	name := os.Getenv("KPROXY_COMPAT_TARGET")
	if name == "" {
		name = defaultTarget
	}
	for _, k := range targetKinds() {
		if k.name == name {
			return k, nil
		}
	}
	return targetKind{}, fmt.Errorf("KPROXY_COMPAT_TARGET=%q: unknown target", name)
}

// kfakeTarget runs franz-go's in-memory fake Kafka: no proxy. It exists to
// debug the client harnesses apart from the proxy.
type kfakeTarget struct{ c *kfake.Cluster }

var kfakeKind = targetKind{
	name:     "kfake",
	describe: "franz-go kfake (3 in-memory brokers, no proxy): harness baseline only",
	start: func(_ context.Context, _ io.Writer) (target, error) {
		c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.DefaultNumPartitions(3),
			kfake.AllowAutoTopicCreation())
		if err != nil {
			return nil, fmt.Errorf("start kfake: %w", err)
		}
		return &kfakeTarget{c: c}, nil
	},
}

func (k *kfakeTarget) bootstrap() []string   { return k.c.ListenAddrs() }
func (k *kfakeTarget) advertised() []string  { return k.c.ListenAddrs() }
func (k *kfakeTarget) close()                { k.c.Close() }
func (k *kfakeTarget) secure() *secureTarget { return nil }

func (k *kfakeTarget) killOwner(_ context.Context, topic string, p int32) (int32, error) {
	id := k.c.LeaderFor(topic, p)
	if id < 0 {
		return -1, fmt.Errorf("kfake: no leader for %s/%d", topic, p)
	}
	if err := k.c.RemoveNode(id); err != nil {
		return id, fmt.Errorf("kfake: remove node %d: %w", id, err)
	}
	return id, nil
}

func (k *kfakeTarget) strandOwner(context.Context, string, int32) (func(context.Context) error, error) {
	return nil, fmt.Errorf("kfake has no partition ownership to strand: %w", errNotSupported)
}

// createTopic makes topic with the given partitions through the bootstrap
// addresses (CreateTopics, falling back to auto-creation by metadata), then
// waits until metadata shows every partition with a leader.
func createTopic(ctx context.Context, bootstrap []string, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		return fmt.Errorf("create topic %s: client: %w", topic, err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	createErr := func() error {
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) != 1 {
			return fmt.Errorf("%d topics in response", len(resp.Topics))
		}
		if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return err
		}
		return nil
	}()
	return waitTopic(ctx, cl, topic, partitions, createErr)
}

func waitTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32, createErr error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for attempt := 0; attempt < 300; attempt++ {
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
		req.AllowAutoTopicCreation = createErr != nil
		resp, err := req.RequestWith(ctx, cl)
		last = err
		if err == nil {
			last = topicReady(resp, topic, partitions)
			if last == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create topic %s: not ready (create: %v): %w", topic, createErr, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("create topic %s: not ready after 300 attempts: %w", topic, last)
}

func topicReady(resp *kmsg.MetadataResponse, topic string, partitions int32) error {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return err
		}
		if int32(len(t.Partitions)) != partitions {
			return fmt.Errorf("%d partitions, want %d", len(t.Partitions), partitions)
		}
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				return fmt.Errorf("partition %d has no leader", p.Partition)
			}
		}
		return nil
	}
	return fmt.Errorf("topic %s not in metadata", topic)
}

// checkAdvertised reports brokers that are not among the addresses the
// target advertises.
func checkAdvertised(tg target, brokers []string) error {
	adv := tg.advertised()
	var bad []string
	for _, b := range brokers {
		if !slices.Contains(adv, b) {
			bad = append(bad, b)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("metadata names brokers %v, cluster advertises %v", bad, adv)
	}
	return nil
}

// tailBuffer keeps the last 64 KiB written to it: a cluster's log, shown
// only when the client's checks failed.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 64<<10 {
		b.buf = b.buf[len(b.buf)-64<<10:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
