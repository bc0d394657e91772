package compat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// kafkaGoDriver drives segmentio/kafka-go: a Writer with the Hash balancer
// (the default round-robin one ignores keys), acks=all and a 10 ms batch
// timeout instead of the 1 s default (test speed only); Readers per
// partition for plain reads and a GroupID Reader (synchronous commits, the
// default) for groups. Everything else is kafka-go's defaults.
type kafkaGoDriver struct{ zone string } // zone: of its readers, in client.id (zone fetch)

func (kafkaGoDriver) name() string         { return "segmentio kafka-go" }
func (kafkaGoDriver) version() string      { return moduleVersion("github.com/segmentio/kafka-go") }
func (kafkaGoDriver) unavailable() string  { return "" }
func (kafkaGoDriver) hasIdempotence() bool { return false }
func (kafkaGoDriver) codecs() []codec      { return allCodecs }
func (kafkaGoDriver) reportsEach() bool    { return true }
func (kafkaGoDriver) notes() []string {
	return []string{"kafka-go has no idempotent producer; its Writer uses the Hash balancer so keys pick partitions."}
}

func kafkaGoCodec(c codec) kafka.Compression {
	switch c {
	case codecGzip:
		return kafka.Gzip
	case codecSnappy:
		return kafka.Snappy
	case codecLZ4:
		return kafka.Lz4
	case codecZstd:
		return kafka.Zstd
	}
	return 0
}

func (kafkaGoDriver) metadata(ctx context.Context, bootstrap []string, topic string) (metaView, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(bootstrap...), Transport: tr, Timeout: 30 * time.Second}
	resp, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return metaView{}, fmt.Errorf("kafka-go metadata: %w", err)
	}
	mv := metaView{brokers: make(map[int32]string), leaders: make(map[int32]int32)}
	for _, b := range resp.Brokers {
		mv.brokers[int32(b.ID)] = net.JoinHostPort(b.Host, strconv.Itoa(b.Port))
	}
	for _, t := range resp.Topics {
		if t.Error != nil {
			return metaView{}, fmt.Errorf("kafka-go metadata %s: %w", topic, t.Error)
		}
		for _, p := range t.Partitions {
			mv.leaders[int32(p.ID)] = int32(p.Leader.ID)
		}
	}
	return mv, nil
}

func (kafkaGoDriver) produce(ctx context.Context, bootstrap []string, topic string, in <-chan Rec, o produceOpts) ([]Rec, error) {
	if o.idempotent {
		return nil, errNotSupported
	}
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{
		Addr:         kafka.TCP(bootstrap...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		Compression:  kafkaGoCodec(o.codec),
		BatchTimeout: 10 * time.Millisecond,
		Transport:    tr,
	}
	if o.deliveryTimeout > 0 {
		// kafka-go has no delivery timeout: a write makes MaxAttempts
		// tries of at most WriteTimeout each, with backoff between them
		// (100 ms to 1 s), so three tries share the bound.
		w.MaxAttempts = 3
		w.WriteTimeout = o.deliveryTimeout / 3
	}
	var acked []Rec
	var firstErr error
	for batch := nextBatch(in, 100); len(batch) > 0; batch = nextBatch(in, 100) {
		msgs := make([]kafka.Message, len(batch))
		for i, r := range batch {
			msgs[i] = kafka.Message{Key: []byte(r.Key), Value: []byte(r.Value)}
		}
		err := w.WriteMessages(ctx, msgs...)
		var werrs kafka.WriteErrors
		switch {
		case err == nil:
			acked = append(acked, batch...)
		case errors.As(err, &werrs):
			for i, e := range werrs {
				if e == nil {
					acked = append(acked, batch[i])
				}
			}
		}
		for i, r := range batch {
			o.answer(r, kafkaGoRecErr(err, i))
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if err := w.Close(); err != nil && firstErr == nil {
		firstErr = fmt.Errorf("kafka-go writer close: %w", err)
	}
	return acked, firstErr
}

// kafkaGoRecErr is the outcome of the i-th message of a WriteMessages call
// that returned err.
func kafkaGoRecErr(err error, i int) error {
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) && i < len(werrs) {
		return werrs[i]
	}
	return err
}

// nextBatch blocks for one record, then takes whatever else is already
// queued, up to max; nil once in is closed and empty.
func nextBatch(in <-chan Rec, max int) []Rec {
	r, ok := <-in
	if !ok {
		return nil
	}
	batch := []Rec{r}
	for len(batch) < max {
		select {
		case r, ok := <-in:
			if !ok {
				return batch
			}
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// inZone: kafka-go's Reader sends no rack, so the zone goes into client.id.
func (kafkaGoDriver) inZone(zone string) (driver, string) {
	return kafkaGoDriver{zone: zone}, "Dialer.ClientID \"zone=" + zone + ",...\" (its Reader has no client.rack)"
}

// dialer is the readers' dialer: kafka-go's default, with the zone in
// client.id when set (nil: the default itself).
func (d kafkaGoDriver) dialer() *kafka.Dialer {
	if d.zone == "" {
		return nil
	}
	dl := *kafka.DefaultDialer
	dl.ClientID = "zone=" + d.zone + ",kproxy-compat"
	return &dl
}

func (d kafkaGoDriver) consume(ctx context.Context, bootstrap []string, topic, group string) (stream, error) {
	if group != "" {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: bootstrap, GroupID: group, Topic: topic,
			StartOffset: kafka.FirstOffset, MaxWait: 250 * time.Millisecond,
		})
		return d.readLoop(ctx, []*kafka.Reader{r})
	}
	mv, err := d.metadata(ctx, bootstrap, topic)
	if err != nil {
		return nil, err
	}
	var readers []*kafka.Reader
	for p := range mv.leaders {
		readers = append(readers, kafka.NewReader(kafka.ReaderConfig{
			Brokers: bootstrap, Topic: topic, Partition: int(p), Dialer: d.dialer(),
			StartOffset: kafka.FirstOffset, MaxWait: 250 * time.Millisecond,
		}))
	}
	return d.readLoop(ctx, readers)
}

func (kafkaGoDriver) readLoop(ctx context.Context, readers []*kafka.Reader) (stream, error) {
	s, loopCtx := newChanStream(ctx)
	var wg sync.WaitGroup
	for _, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := r.ReadMessage(loopCtx)
				if err != nil {
					if loopCtx.Err() == nil && !errors.Is(err, io.EOF) {
						s.fail(fmt.Errorf("kafka-go read: %w", err))
					}
					return
				}
				s.push(Rec{Partition: int32(m.Partition), Offset: m.Offset, Key: string(m.Key), Value: string(m.Value)})
			}
		}()
	}
	go func() { wg.Wait(); s.loopDone() }()
	s.shutdown = func(context.Context) error {
		var errs []error
		for _, r := range readers {
			errs = append(errs, r.Close())
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("kafka-go reader close: %w", err)
		}
		return nil
	}
	return s, nil
}
