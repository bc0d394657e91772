package compat

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kgoDriver drives franz-go's kgo client with its defaults plus acks=all and
// the codec under test.
type kgoDriver struct{ rack string } // rack: client.rack of its consumers (zone fetch)

func (kgoDriver) name() string        { return "franz-go kgo" }
func (kgoDriver) version() string     { return moduleVersion("github.com/twmb/franz-go") }
func (kgoDriver) unavailable() string { return "" }
func (kgoDriver) hasIdempotence() bool {
	return true
}
func (kgoDriver) codecs() []codec   { return allCodecs }
func (kgoDriver) reportsEach() bool { return true }
func (kgoDriver) notes() []string {
	return []string{"kgo's producer is idempotent by default, so every kgo capability produces idempotently."}
}

func kgoCodec(c codec) kgo.CompressionCodec {
	switch c {
	case codecGzip:
		return kgo.GzipCompression()
	case codecSnappy:
		return kgo.SnappyCompression()
	case codecLZ4:
		return kgo.Lz4Compression()
	case codecZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

func (kgoDriver) metadata(ctx context.Context, bootstrap []string, topic string) (metaView, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		return metaView{}, fmt.Errorf("kgo client: %w", err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return metaView{}, fmt.Errorf("kgo metadata: %w", err)
	}
	mv := metaView{brokers: make(map[int32]string), leaders: make(map[int32]int32)}
	for _, b := range resp.Brokers {
		mv.brokers[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return metaView{}, fmt.Errorf("kgo metadata %s: %w", topic, err)
		}
		for _, p := range t.Partitions {
			mv.leaders[p.Partition] = p.Leader
		}
	}
	return mv, nil
}

func (kgoDriver) produce(ctx context.Context, bootstrap []string, topic string, in <-chan Rec, o produceOpts) ([]Rec, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap...),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgoCodec(o.codec)),
	}
	if o.deliveryTimeout > 0 {
		// kgo enforces RecordDeliveryTimeout only between requests (an
		// idempotent record in flight waits for its response), so the
		// request timeout is part of the bound, as Java's client requires
		// delivery.timeout.ms >= request.timeout.ms: half of it each.
		opts = append(opts, kgo.RecordDeliveryTimeout(o.deliveryTimeout), kgo.ProduceRequestTimeout(o.deliveryTimeout/2))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kgo client: %w", err)
	}
	defer cl.Close()
	var (
		mu       sync.Mutex
		acked    []Rec
		firstErr error
	)
	for r := range in {
		rec := &kgo.Record{Key: []byte(r.Key), Value: []byte(r.Value)}
		cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
			o.answer(r, err)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			acked = append(acked, Rec{Partition: rec.Partition, Offset: rec.Offset, Key: string(rec.Key), Value: string(rec.Value)})
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, fmt.Errorf("kgo flush: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	return acked, firstErr
}

func (kgoDriver) inZone(zone string) (driver, string) {
	return kgoDriver{rack: zone}, "kgo.Rack (client.rack)"
}

func (d kgoDriver) consume(ctx context.Context, bootstrap []string, topic, group string) (stream, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	if d.rack != "" {
		opts = append(opts, kgo.Rack(d.rack))
	}
	if group != "" {
		opts = append(opts, kgo.ConsumerGroup(group))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kgo client: %w", err)
	}
	s, loopCtx := newChanStream(ctx)
	go func() {
		defer s.loopDone()
		for loopCtx.Err() == nil {
			fs := cl.PollFetches(loopCtx)
			fs.EachError(func(t string, p int32, err error) {
				if !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
					s.fail(fmt.Errorf("kgo fetch %s/%d: %w", t, p, err))
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				s.push(Rec{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)})
			})
		}
	}()
	s.shutdown = func(ctx context.Context) error {
		defer cl.Close()
		if group == "" {
			return nil
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			return fmt.Errorf("kgo commit: %w", err)
		}
		return nil
	}
	return s, nil
}
