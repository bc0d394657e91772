package compat

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// confluentDriver drives confluent-kafka-go (cgo, its bundled librdkafka)
// with librdkafka's defaults plus acks=all, the codec under test, and
// auto.offset.reset=earliest.
type confluentDriver struct{ rack string } // rack: client.rack of its consumers (zone fetch)

func (confluentDriver) name() string { return "confluent-kafka-go" }
func (confluentDriver) version() string {
	_, lib := kafka.LibraryVersion()
	return fmt.Sprintf("%s (librdkafka %s)", moduleVersion("github.com/confluentinc/confluent-kafka-go/v2"), lib)
}
func (confluentDriver) unavailable() string  { return "" }
func (confluentDriver) hasIdempotence() bool { return true }
func (confluentDriver) codecs() []codec      { return allCodecs }
func (confluentDriver) reportsEach() bool    { return true }
func (confluentDriver) notes() []string {
	return []string{"librdkafka defaults: idempotence off unless tested, message.timeout.ms 300000, consistent_random partitioner."}
}

func confluentConfig(bootstrap []string, extra kafka.ConfigMap) *kafka.ConfigMap {
	cm := kafka.ConfigMap{
		"bootstrap.servers": strings.Join(bootstrap, ","),
		"client.id":         "kproxy-compat",
		"log_level":         4, // warnings and worse
	}
	// KPROXY_COMPAT_RDKAFKA_DEBUG=fetch,protocol,... turns on librdkafka's
	// debug log (stderr) when a cell needs investigating.
	if dbg := os.Getenv("KPROXY_COMPAT_RDKAFKA_DEBUG"); dbg != "" {
		cm["debug"] = dbg
	}
	for k, v := range extra {
		cm[k] = v
	}
	return &cm
}

func (confluentDriver) metadata(_ context.Context, bootstrap []string, topic string) (metaView, error) {
	a, err := kafka.NewAdminClient(confluentConfig(bootstrap, nil))
	if err != nil {
		return metaView{}, fmt.Errorf("confluent admin: %w", err)
	}
	defer a.Close()
	md, err := a.GetMetadata(&topic, false, 30000)
	if err != nil {
		return metaView{}, fmt.Errorf("confluent metadata: %w", err)
	}
	mv := metaView{brokers: make(map[int32]string), leaders: make(map[int32]int32)}
	for _, b := range md.Brokers {
		mv.brokers[b.ID] = fmt.Sprintf("%s:%d", b.Host, b.Port)
	}
	tm, ok := md.Topics[topic]
	if !ok {
		return metaView{}, fmt.Errorf("confluent metadata: no topic %s", topic)
	}
	if tm.Error.Code() != kafka.ErrNoError {
		return metaView{}, fmt.Errorf("confluent metadata %s: %w", topic, tm.Error)
	}
	for _, p := range tm.Partitions {
		mv.leaders[p.ID] = p.Leader
	}
	return mv, nil
}

func (confluentDriver) produce(ctx context.Context, bootstrap []string, topic string, in <-chan Rec, o produceOpts) ([]Rec, error) {
	extra := kafka.ConfigMap{"acks": "all"}
	if o.codec != "" {
		extra["compression.type"] = string(o.codec)
	}
	if o.idempotent {
		extra["enable.idempotence"] = true
	}
	if o.deliveryTimeout > 0 {
		extra["message.timeout.ms"] = int(o.deliveryTimeout.Milliseconds())
	}
	p, err := kafka.NewProducer(confluentConfig(bootstrap, extra))
	if err != nil {
		return nil, fmt.Errorf("confluent producer: %w", err)
	}
	defer p.Close()
	var (
		mu       sync.Mutex
		acked    []Rec
		firstErr error
	)
	setErr := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	deliveries := make(chan kafka.Event, maxLines)
	eventsDone := make(chan struct{})
	go func() { // application-visible errors that are not per message
		defer close(eventsDone)
		for ev := range p.Events() {
			if e, ok := ev.(kafka.Error); ok && e.IsFatal() {
				setErr(fmt.Errorf("confluent fatal error: %w", e))
			}
		}
	}()
	// Delivery reports are handled as they arrive, as an application's
	// delivery callback would, so that each record's outcome is known when
	// the client reports it; stop ends the reader.
	reported := make(chan struct{}, maxLines)
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	defer func() { close(stop); <-readerDone }()
	go func() {
		defer close(readerDone)
		for {
			select {
			case ev := <-deliveries:
				if m, ok := ev.(*kafka.Message); ok {
					r := Rec{Partition: m.TopicPartition.Partition, Offset: int64(m.TopicPartition.Offset), Key: string(m.Key), Value: string(m.Value)}
					o.answer(r, m.TopicPartition.Error)
					if m.TopicPartition.Error != nil {
						setErr(fmt.Errorf("confluent delivery: %w", m.TopicPartition.Error))
					} else {
						mu.Lock()
						acked = append(acked, r)
						mu.Unlock()
					}
				}
				reported <- struct{}{}
			case <-stop:
				return
			}
		}
	}()
	sent := 0
	for r := range in {
		err := p.Produce(&kafka.Message{
			TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key:            []byte(r.Key), Value: []byte(r.Value),
		}, deliveries)
		if err != nil {
			setErr(fmt.Errorf("confluent produce: %w", err))
			break
		}
		sent++
	}
	for ctx.Err() == nil && p.Flush(100) > 0 { // Flush(ms) returns what is still outstanding
	}
	for reports := 0; reports < sent; reports++ {
		select {
		case <-reported:
		case <-ctx.Done():
			setErr(fmt.Errorf("confluent: %d of %d delivery reports: %w", reports, sent, ctx.Err()))
			reports = sent
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return acked, firstErr
}

func (confluentDriver) inZone(zone string) (driver, string) {
	return confluentDriver{rack: zone}, "client.rack"
}

func (d confluentDriver) consume(ctx context.Context, bootstrap []string, topic, group string) (stream, error) {
	extra := kafka.ConfigMap{"auto.offset.reset": "earliest"}
	if d.rack != "" {
		extra["client.rack"] = d.rack
	}
	plain := group == ""
	if plain {
		// librdkafka's consumer needs a group.id even to assign partitions
		// by hand; nothing is committed to it.
		extra["group.id"] = fmt.Sprintf("compat-plain-%d", rand.Int64())
		extra["enable.auto.commit"] = false
	} else {
		extra["group.id"] = group
	}
	c, err := kafka.NewConsumer(confluentConfig(bootstrap, extra))
	if err != nil {
		return nil, fmt.Errorf("confluent consumer: %w", err)
	}
	if err := confluentSubscribe(c, topic, plain); err != nil {
		c.Close()
		return nil, err
	}
	s, loopCtx := newChanStream(ctx)
	go func() {
		defer s.loopDone()
		for loopCtx.Err() == nil {
			switch ev := c.Poll(100).(type) {
			case *kafka.Message:
				if ev.TopicPartition.Error != nil {
					s.fail(fmt.Errorf("confluent consume: %w", ev.TopicPartition.Error))
					continue
				}
				s.push(Rec{Partition: ev.TopicPartition.Partition, Offset: int64(ev.TopicPartition.Offset), Key: string(ev.Key), Value: string(ev.Value)})
			case kafka.Error:
				if ev.IsFatal() {
					s.fail(fmt.Errorf("confluent consumer fatal: %w", ev))
					return
				}
			}
		}
	}()
	s.shutdown = func(context.Context) error {
		// Close commits the consumed offsets when auto-commit is on.
		if err := c.Close(); err != nil {
			return fmt.Errorf("confluent consumer close: %w", err)
		}
		return nil
	}
	return s, nil
}

func confluentSubscribe(c *kafka.Consumer, topic string, plain bool) error {
	if !plain {
		if err := c.Subscribe(topic, nil); err != nil {
			return fmt.Errorf("confluent subscribe %s: %w", topic, err)
		}
		return nil
	}
	md, err := c.GetMetadata(&topic, false, 30000)
	if err != nil {
		return fmt.Errorf("confluent metadata %s: %w", topic, err)
	}
	var tps []kafka.TopicPartition
	for _, p := range md.Topics[topic].Partitions {
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.OffsetBeginning})
	}
	if err := c.Assign(tps); err != nil {
		return fmt.Errorf("confluent assign %s: %w", topic, err)
	}
	return nil
}
