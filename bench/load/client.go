package load

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Target says how clients reach the cluster.
type Target struct {
	// Seeds are the bootstrap addresses (host:port).
	Seeds []string
	// DialMap rewrites dial addresses: a client that would dial a key dials
	// the value instead. The relay side uses it to send every connection to
	// a broker through that broker's relay while the clients still use the
	// brokers' own metadata (brokers advertise their own addresses because
	// the proxy must reach them directly).
	DialMap map[string]string
}

// options are the kgo options every client of a run shares.
func (t Target) options(logger *slog.Logger) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(t.Seeds...),
		kgo.SoftwareNameAndVersion("kbench", "1"),
		kgo.ClientID("kbench"),
	}
	if logger != nil {
		opts = append(opts, kgo.WithLogger(slogLogger{logger}))
	}
	if len(t.DialMap) > 0 {
		dialMap := t.DialMap
		d := &net.Dialer{Timeout: 10 * time.Second}
		opts = append(opts, kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if to, ok := dialMap[host]; ok {
				host = to
			}
			return d.DialContext(ctx, network, host)
		}))
	}
	return opts
}

// slogLogger passes kgo's warnings and errors to slog.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (s slogLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lvl := slog.LevelWarn
	if level == kgo.LogLevelError {
		lvl = slog.LevelError
	}
	s.l.Log(context.Background(), lvl, "kgo: "+msg, keyvals...)
}

// Partitions returns the partition count of topic.
func Partitions(ctx context.Context, cl *kgo.Client, topic string) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("metadata for %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return 0, fmt.Errorf("metadata for %s: %w", topic, err)
		}
		return int32(len(t.Partitions)), nil
	}
	return 0, fmt.Errorf("metadata for %s: topic missing from the answer", topic)
}

// EndOffsets returns the high watermark of every partition of topic.
func EndOffsets(ctx context.Context, cl *kgo.Client, topic string, partitions int32) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl) // kgo splits by partition leader
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	ends := make(map[int32]int64, partitions)
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("%s/%d: %w", topic, p.Partition, err))
				continue
			}
			ends[p.Partition] = p.Offset
		}
	}
	if len(ends) != int(partitions) {
		return nil, fmt.Errorf("list end offsets of %s: %d of %d partitions answered: %w", topic, len(ends), partitions, errors.Join(errs...))
	}
	return ends, nil
}

// CreateTopic creates topic with the given partition count; an existing
// topic with that count is fine.
func CreateTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30_000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		err := kerr.ErrorForCode(t.ErrorCode)
		if errors.Is(err, kerr.TopicAlreadyExists) {
			n, perr := Partitions(ctx, cl, topic)
			if perr != nil {
				return perr
			}
			if n != partitions {
				return fmt.Errorf("create topic %s: exists with %d partitions, want %d", topic, n, partitions)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	return nil
}

// EnsureTopic creates topic with the given partition count through t
// unless it already exists with that count.
func EnsureTopic(ctx context.Context, t Target, topic string, partitions int32, logger *slog.Logger) error {
	cl, err := kgo.NewClient(t.options(logger)...)
	if err != nil {
		return fmt.Errorf("new admin client: %w", err)
	}
	defer cl.Close()
	return CreateTopic(ctx, cl, topic, partitions)
}
