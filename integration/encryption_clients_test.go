package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// sarama and kcat (librdkafka) produce to and consume from an encrypted
// topic through kproxy; the brokers hold no plaintext.

func TestEncryptionSaramaAndKcat(t *testing.T) {
	p := startEncPool(t, 1, "", "")
	t.Run("sarama", func(t *testing.T) {
		const topic = "secret-sarama"
		p.createTopic(t, topic)
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_8_0_0
		cfg.Producer.Return.Successes = true
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Compression = sarama.CompressionLZ4
		cfg.Producer.Partitioner = sarama.NewManualPartitioner // all to partition 0
		prod, err := sarama.NewSyncProducer(p.proxies, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		var want []string
		for i := range 10 {
			v := fmt.Sprintf("plaintext sarama %d", i)
			if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(v),
				Headers: []sarama.RecordHeader{{Key: []byte("clear"), Value: []byte("yes")}}}); err != nil {
				t.Fatalf("sarama produce: %v", err)
			}
			want = append(want, v)
		}
		cons, err := sarama.NewConsumer(p.proxies, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer cons.Close()
		got := saramaConsume(t, cons, topic, len(want))
		if !slices.Equal(got, want) {
			t.Fatalf("sarama consumed %q, want %q", got, want)
		}
		checkNoPlaintext(t, readAll(t, p.brokers, topic, len(want)), [][]byte{[]byte("plaintext")})
	})
	t.Run("kcat", func(t *testing.T) {
		if _, err := exec.LookPath("kcat"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true: kcat is not installed: %v", err)
			}
			t.Skipf("kcat is not installed (apt-get install kcat): %v", err)
		}
		const topic = "secret-kcat"
		p.createTopic(t, topic)
		var want []string
		for i := range 10 {
			want = append(want, fmt.Sprintf("plaintext kcat %d", i))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		prod := exec.CommandContext(ctx, "kcat", "-P", "-b", p.proxies[0], "-t", topic, "-p", "0", "-z", "snappy", "-X", "acks=all")
		prod.Stdin = strings.NewReader(strings.Join(want, "\n") + "\n")
		if out, err := prod.CombinedOutput(); err != nil {
			t.Fatalf("kcat -P: %v: %s", err, out)
		}
		cons := exec.CommandContext(ctx, "kcat", "-C", "-b", p.proxies[0], "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%s\\n")
		var stderr bytes.Buffer
		cons.Stderr = &stderr
		out, err := cons.Output()
		if err != nil {
			t.Fatalf("kcat -C: %v: %s", err, stderr.String())
		}
		if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); !slices.Equal(got, want) {
			t.Fatalf("kcat consumed %q, want %q", got, want)
		}
		checkNoPlaintext(t, readAll(t, p.brokers, topic, len(want)), [][]byte{[]byte("plaintext")})
	})
}

// saramaConsume reads want values of topic's partition 0 from the start.
func saramaConsume(t *testing.T, c sarama.Consumer, topic string, want int) []string {
	t.Helper()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var got []string
	timeout := time.After(30 * time.Second)
	for len(got) < want {
		select {
		case m := <-pc.Messages():
			if len(m.Headers) != 1 || string(m.Headers[0].Key) != "clear" {
				t.Fatalf("sarama consumed headers %v, want only the producer's", m.Headers)
			}
			got = append(got, string(m.Value))
		case err := <-pc.Errors():
			t.Fatalf("sarama consume: %v", err)
		case <-timeout:
			t.Fatalf("sarama consumed %d of %d records", len(got), want)
		}
	}
	return got
}
