package compat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// saramaDriver drives IBM sarama with its defaults (protocol version
// sarama.DefaultVersion, 3 retries 100 ms apart, hash partitioner) plus
// acks=all, the codec under test, and OffsetOldest for new groups.
type saramaDriver struct{ rack string } // rack: zone of its consumers (zone fetch)

func (saramaDriver) name() string         { return "IBM sarama" }
func (saramaDriver) version() string      { return moduleVersion("github.com/IBM/sarama") }
func (saramaDriver) unavailable() string  { return "" }
func (saramaDriver) hasIdempotence() bool { return true }
func (saramaDriver) codecs() []codec      { return allCodecs }
func (saramaDriver) reportsEach() bool    { return true }
func (saramaDriver) notes() []string {
	return []string{fmt.Sprintf("protocol version %s (sarama's default); the idempotent producer needs Net.MaxOpenRequests=1 as sarama requires.", sarama.DefaultVersion)}
}

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.ClientID = "kproxy-compat"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	return cfg
}

func saramaCodec(c codec) sarama.CompressionCodec {
	switch c {
	case codecGzip:
		return sarama.CompressionGZIP
	case codecSnappy:
		return sarama.CompressionSnappy
	case codecLZ4:
		return sarama.CompressionLZ4
	case codecZstd:
		return sarama.CompressionZSTD
	}
	return sarama.CompressionNone
}

func (saramaDriver) metadata(_ context.Context, bootstrap []string, topic string) (metaView, error) {
	cl, err := sarama.NewClient(bootstrap, saramaConfig())
	if err != nil {
		return metaView{}, fmt.Errorf("sarama client: %w", err)
	}
	defer cl.Close()
	if err := cl.RefreshMetadata(topic); err != nil {
		return metaView{}, fmt.Errorf("sarama metadata %s: %w", topic, err)
	}
	mv := metaView{brokers: make(map[int32]string), leaders: make(map[int32]int32)}
	for _, b := range cl.Brokers() {
		mv.brokers[b.ID()] = b.Addr()
	}
	ps, err := cl.Partitions(topic)
	if err != nil {
		return metaView{}, fmt.Errorf("sarama partitions %s: %w", topic, err)
	}
	for _, p := range ps {
		l, err := cl.Leader(topic, p)
		if err != nil {
			return metaView{}, fmt.Errorf("sarama leader %s/%d: %w", topic, p, err)
		}
		mv.leaders[p] = l.ID()
	}
	return mv, nil
}

func (saramaDriver) produce(ctx context.Context, bootstrap []string, topic string, in <-chan Rec, o produceOpts) ([]Rec, error) {
	cfg := saramaConfig()
	cfg.Producer.Compression = saramaCodec(o.codec)
	if o.idempotent {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	if o.deliveryTimeout > 0 {
		// sarama has no delivery timeout: a message gets Retry.Max
		// retries (100 ms apart) after its first try, each try bounded by
		// Net.ReadTimeout (and the broker's wait by Producer.Timeout), so
		// the tries share the bound.
		try := o.deliveryTimeout / time.Duration(cfg.Producer.Retry.Max+1)
		cfg.Net.ReadTimeout = try
		cfg.Producer.Timeout = min(cfg.Producer.Timeout, try)
	}
	p, err := sarama.NewAsyncProducer(bootstrap, cfg)
	if err != nil {
		return nil, fmt.Errorf("sarama producer: %w", err)
	}
	var (
		mu       sync.Mutex
		acked    []Rec
		firstErr error
		reports  = make(chan struct{}, maxLines)
		wg       sync.WaitGroup
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for m := range p.Successes() {
			o.answer(saramaRec(m), nil)
			mu.Lock()
			acked = append(acked, saramaRec(m))
			mu.Unlock()
			reports <- struct{}{}
		}
	}()
	go func() {
		defer wg.Done()
		for e := range p.Errors() {
			o.answer(saramaRec(e.Msg), e.Err)
			mu.Lock()
			if firstErr == nil {
				firstErr = e.Err
			}
			mu.Unlock()
			reports <- struct{}{}
		}
	}()
	sent, feedErr := 0, error(nil)
	for r := range in {
		if feedErr != nil {
			continue // drain in so the feeder is not blocked
		}
		m := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(r.Key), Value: sarama.StringEncoder(r.Value)}
		select {
		case p.Input() <- m:
			sent++
		case <-ctx.Done():
			feedErr = ctx.Err()
		}
	}
	// Wait for every outcome before closing, as a long-lived application
	// would: sarama fails retries that are still pending at AsyncClose
	// with ErrShuttingDown.
	for got := 0; got < sent && feedErr == nil; got++ {
		select {
		case <-reports:
		case <-ctx.Done():
			feedErr = fmt.Errorf("sarama: %d of %d outcomes: %w", got, sent, ctx.Err())
		}
	}
	p.AsyncClose() // closes Successes and Errors once drained
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return acked, errors.Join(feedErr, firstErr)
}

func saramaRec(m *sarama.ProducerMessage) Rec {
	k, _ := m.Key.Encode()
	v, _ := m.Value.Encode()
	return Rec{Partition: m.Partition, Offset: m.Offset, Key: string(k), Value: string(v)}
}

// inZone: sarama sends Config.RackID from Version 2.4 (Fetch v11); its
// default Version is above that.
func (saramaDriver) inZone(zone string) (driver, string) {
	return saramaDriver{rack: zone}, "Config.RackID"
}

// config is saramaConfig with the consumers' zone, if any.
func (d saramaDriver) config() *sarama.Config {
	cfg := saramaConfig()
	if d.rack != "" {
		cfg.RackID = d.rack
	}
	return cfg
}

func (d saramaDriver) consume(ctx context.Context, bootstrap []string, topic, group string) (stream, error) {
	if group != "" {
		return d.consumeGroup(ctx, bootstrap, topic, group)
	}
	c, err := sarama.NewConsumer(bootstrap, d.config())
	if err != nil {
		return nil, fmt.Errorf("sarama consumer: %w", err)
	}
	ps, err := c.Partitions(topic)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("sarama partitions %s: %w", topic, err)
	}
	s, loopCtx := newChanStream(ctx)
	var pcs []sarama.PartitionConsumer
	for _, p := range ps {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("sarama consume %s/%d: %w", topic, p, err)
		}
		pcs = append(pcs, pc)
	}
	var wg sync.WaitGroup
	for _, pc := range pcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case m := <-pc.Messages():
					s.push(Rec{Partition: m.Partition, Offset: m.Offset, Key: string(m.Key), Value: string(m.Value)})
				case <-loopCtx.Done():
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); s.loopDone() }()
	s.shutdown = func(context.Context) error {
		var errs []error
		for _, pc := range pcs {
			errs = append(errs, pc.Close())
		}
		errs = append(errs, c.Close())
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("sarama consumer close: %w", err)
		}
		return nil
	}
	return s, nil
}

func (saramaDriver) consumeGroup(ctx context.Context, bootstrap []string, topic, group string) (stream, error) {
	cg, err := sarama.NewConsumerGroup(bootstrap, group, saramaConfig())
	if err != nil {
		return nil, fmt.Errorf("sarama consumer group: %w", err)
	}
	s, loopCtx := newChanStream(ctx)
	go func() {
		defer s.loopDone()
		h := saramaHandler{s: s}
		// Consume returns at every rebalance; the loop rejoins, as the
		// sarama docs prescribe.
		for i := 0; loopCtx.Err() == nil && i < 1000; i++ {
			if err := cg.Consume(loopCtx, []string{topic}, h); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) || loopCtx.Err() != nil {
					return
				}
				s.fail(fmt.Errorf("sarama group consume: %w", err))
				return
			}
		}
	}()
	s.shutdown = func(context.Context) error {
		if err := cg.Close(); err != nil {
			return fmt.Errorf("sarama group close: %w", err)
		}
		return nil
	}
	return s, nil
}

type saramaHandler struct{ s *chanStream }

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h saramaHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.s.push(Rec{Partition: m.Partition, Offset: m.Offset, Key: string(m.Key), Value: string(m.Value)})
			sess.MarkMessage(m, "")
		case <-sess.Context().Done():
			return nil
		}
	}
}
