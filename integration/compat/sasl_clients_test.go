package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/kproxy/kproxy/testkit/saramascram"
	kafkago "github.com/segmentio/kafka-go"
	kgscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kgo"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/scram"
)

// Each client's SASL_SSL round trip (sasl_test.go), with its own API and
// the settings its documentation gives for SASL_SSL and SCRAM-SHA-512.

func (kgoDriver) saslRoundTrip(ctx context.Context, st secureTarget, topic string, n int) error {
	opts := []kgo.Opt{kgo.SeedBrokers(st.bootstrap...), kgo.DialTLSConfig(st.tls),
		kgo.SASL(kscram.Auth{User: st.user, Pass: st.pass}.AsSha512Mechanism())}
	p, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return err
	}
	defer p.Close()
	for i := range n {
		if err := p.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			return fmt.Errorf("produce %d: %w", i, err)
		}
	}
	c, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumerGroup(topic+"-group"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return err
	}
	defer c.Close()
	for got := 0; got < n; {
		fs := c.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("consumed %d of %d: %w", got, n, ctx.Err())
		}
		if err := fs.Err(); err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		got += fs.NumRecords()
	}
	return c.CommitUncommittedOffsets(ctx)
}

func (saramaDriver) saslRoundTrip(ctx context.Context, st secureTarget, topic string, n int) error {
	cfg := saramaConfig()
	cfg.Net.TLS.Enable, cfg.Net.TLS.Config = true, st.tls
	cfg.Net.SASL.Enable, cfg.Net.SASL.Mechanism = true, sarama.SASLTypeSCRAMSHA512
	cfg.Net.SASL.User, cfg.Net.SASL.Password = st.user, st.pass
	cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramascram.Client{Hash: scram.SHA512} }
	p, err := sarama.NewSyncProducer(st.bootstrap, cfg)
	if err != nil {
		return fmt.Errorf("sarama producer: %w", err)
	}
	defer p.Close()
	for i := range n {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder(fmt.Sprint(i))}); err != nil {
			return fmt.Errorf("send %d: %w", i, err)
		}
	}
	g, err := sarama.NewConsumerGroup(st.bootstrap, topic+"-group", cfg)
	if err != nil {
		return fmt.Errorf("sarama group: %w", err)
	}
	defer g.Close()
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	h := &saramaCounter{want: int64(n), done: stop}
	for gctx.Err() == nil {
		if err := g.Consume(gctx, []string{topic}, h); err != nil && gctx.Err() == nil {
			return fmt.Errorf("consume: %w", err)
		}
	}
	if got := h.got.Load(); got < int64(n) {
		return fmt.Errorf("group read %d of %d", got, n)
	}
	return nil
}

// saramaCounter counts what every claim (a goroutine per partition)
// consumed and ends the session at want.
type saramaCounter struct {
	want int64
	got  atomic.Int64
	done func()
}

func (*saramaCounter) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*saramaCounter) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaCounter) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		s.MarkMessage(m, "")
		if h.got.Add(1) >= h.want {
			s.Commit()
			h.done()
			return nil
		}
	}
	return nil
}

func (kafkaGoDriver) saslRoundTrip(ctx context.Context, st secureTarget, topic string, n int) error {
	mech, err := kgscram.Mechanism(kgscram.SHA512, st.user, st.pass)
	if err != nil {
		return err
	}
	w := &kafkago.Writer{Addr: kafkago.TCP(st.bootstrap...), Topic: topic, RequiredAcks: kafkago.RequireAll,
		Transport: &kafkago.Transport{TLS: st.tls, SASL: mech}, BatchTimeout: time.Millisecond}
	defer w.Close()
	for i := range n {
		if err := w.WriteMessages(ctx, kafkago.Message{Value: []byte(fmt.Sprint(i))}); err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
	}
	r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: st.bootstrap, Topic: topic, GroupID: topic + "-group",
		StartOffset: kafkago.FirstOffset, Dialer: &kafkago.Dialer{TLS: st.tls, SASLMechanism: mech, Timeout: 10 * time.Second}})
	defer r.Close()
	for i := range n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return fmt.Errorf("read %d: %w", i, err)
		}
		if err := r.CommitMessages(ctx, m); err != nil {
			return fmt.Errorf("commit %d: %w", i, err)
		}
	}
	return nil
}

func confluentSASL(st secureTarget) kafka.ConfigMap {
	return kafka.ConfigMap{"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
		"sasl.username": st.user, "sasl.password": st.pass, "ssl.ca.location": st.caFile}
}

func (confluentDriver) saslRoundTrip(ctx context.Context, st secureTarget, topic string, n int) error {
	pc := confluentSASL(st)
	pc["acks"] = "all"
	p, err := kafka.NewProducer(confluentConfig(st.bootstrap, pc))
	if err != nil {
		return fmt.Errorf("confluent producer: %w", err)
	}
	defer p.Close()
	deliveries := make(chan kafka.Event, n)
	for i := range n {
		if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny}, Value: []byte(fmt.Sprint(i))}, deliveries); err != nil {
			return fmt.Errorf("produce %d: %w", i, err)
		}
	}
	for i := range n {
		select {
		case ev := <-deliveries:
			if m, ok := ev.(*kafka.Message); ok && m.TopicPartition.Error != nil {
				return fmt.Errorf("delivery %d: %w", i, m.TopicPartition.Error)
			}
		case <-ctx.Done():
			return fmt.Errorf("delivery %d: %w", i, ctx.Err())
		}
	}
	cc := confluentSASL(st)
	cc["group.id"], cc["auto.offset.reset"] = topic+"-group", "earliest"
	c, err := kafka.NewConsumer(confluentConfig(st.bootstrap, cc))
	if err != nil {
		return fmt.Errorf("confluent consumer: %w", err)
	}
	defer c.Close()
	if err := c.Subscribe(topic, nil); err != nil {
		return err
	}
	for got := 0; got < n; {
		if ctx.Err() != nil {
			return fmt.Errorf("group read %d of %d: %w", got, n, ctx.Err())
		}
		m, err := c.ReadMessage(time.Second)
		var ke kafka.Error
		switch {
		case errors.As(err, &ke) && ke.IsTimeout():
			continue
		case err != nil:
			return fmt.Errorf("read: %w", err)
		}
		if _, err := c.CommitMessage(m); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		got++
	}
	return nil
}

func (d kcatDriver) saslRoundTrip(ctx context.Context, st secureTarget, topic string, n int) error {
	sec := []string{"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
		"-X", "sasl.username=" + st.user, "-X", "sasl.password=" + st.pass, "-X", "ssl.ca.location=" + st.caFile}
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "kcat", append(append([]string{"-b", strings.Join(st.bootstrap, ","), "-q"}, sec...), args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("kcat %v: %w: %s", args, err, oneLine(stderr.String()))
		}
		return string(out), nil
	}
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprint(i)
	}
	if _, err := run(strings.Join(lines, "\n")+"\n", "-P", "-t", topic, "-X", "acks=all"); err != nil {
		return err
	}
	out, err := run("", "-G", topic+"-group", "-c", fmt.Sprint(n), "-o", "beginning", topic)
	if err != nil {
		return err
	}
	if got := len(strings.Fields(out)); got != n {
		return fmt.Errorf("kcat -G read %d of %d records", got, n)
	}
	return nil
}

func (kafkajsDriver) saslRoundTrip(ctx context.Context, st secureTarget, topic string, n int) error {
	modules, err := filepath.Abs(filepath.Join(nodeDir, "node_modules"))
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "node", filepath.Join(nodeDir, "sasl.js"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules, "BOOTSTRAP="+strings.Join(st.bootstrap, ","), "CA_FILE="+st.caFile,
		"TOPIC="+topic, "GROUP="+topic+"-group", fmt.Sprintf("COUNT=%d", n),
		"MECHANISM=scram-sha-512", "USERNAME="+st.user, "PASSWORD="+st.pass)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("kafkajs: %w: %s", err, oneLine(stderr.String()))
	}
	var res struct{ Produced, Consumed int }
	if err := json.Unmarshal(out, &res); err != nil || res.Produced != n || res.Consumed < n {
		return fmt.Errorf("kafkajs reported %q (%v)", out, err)
	}
	return nil
}
