package compat

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/crypt"
	"github.com/kproxy/kproxy/testkit/motokms"
)

// encryptedTopic runs the client against a cluster of its own whose proxy
// encrypts topics (--encryption-config, moto's KMS): the client produces
// and reads back as on any topic, and a read that bypasses the proxy finds
// every stored value encrypted.
func (h *harness) encryptedTopic(t *testing.T) (string, error) {
	if h.kind.name != devclusterKind.name {
		return "runs on the dev cluster only (kfake has no proxy to encrypt)", errNotSupported
	}
	if !motokms.Installed() {
		return "", missingClient{motokms.Missing}
	}
	moto := motokms.Start(t)
	moto.CreateKey(t, "alias/kproxy-compat")
	file := filepath.Join(t.TempDir(), "encryption.yaml")
	conf := fmt.Sprintf("kms:\n  type: aws\n  endpoint: %s\n  region: us-east-1\ntopics:\n  - match: \"*-encrypted\"\n    key: alias/kproxy-compat\n", moto.Endpoint)
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		return "", err
	}
	ctx, cancel := h.within(240 * time.Second)
	defer cancel()
	nh, closeCluster, err := h.ownCluster(ctx, t, "encrypting", func(cfg *devcluster.Config) {
		cfg.ProxyConfig = func(_ int, pc *assembly.Config) { pc.EncryptionFile = file }
	})
	if err != nil {
		return "", err
	}
	defer closeCluster()
	topic, err := nh.topic(ctx, "encrypted")
	if err != nil {
		return "", err
	}
	recs := makeRecords(topic, 0, 300)
	if err := produceAll(ctx, nh.d, nh.tg.bootstrap(), topic, recs, produceOpts{}); err != nil {
		return "", err
	}
	if err := nh.readBack(ctx, t, topic, recs, 60*time.Second); err != nil {
		return "", err
	}
	return "", storedEncrypted(ctx, nh.tg.(*devTarget).c, topic, len(recs))
}

// storedEncrypted reads topic from the brokers, bypassing the proxy, and
// fails unless each of its want records carries the kproxy.enc header and
// no plaintext.
func storedEncrypted(ctx context.Context, c *devcluster.Cluster, topic string, want int) error {
	var seeds []string
	for _, id := range c.BrokerIDs() {
		seeds = append(seeds, c.BrokerAddr(id))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	n := 0
	for n < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("read %d of %d stored records from the brokers", n, want)
		}
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			n++
			if len(r.Headers) == 0 || r.Headers[len(r.Headers)-1].Key != crypt.HeaderKey || bytes.Contains(r.Value, []byte(pad[:12])) {
				bad = fmt.Errorf("stored record %d/%d is not encrypted", r.Partition, r.Offset)
			}
		})
		if bad != nil {
			return bad
		}
	}
	return nil
}

// ownCluster starts a dev cluster of its own for one capability (3
// brokers, 1 proxy, adjust's changes) and returns a harness on it and
// the function that closes it, logging its warnings if the test failed.
func (h *harness) ownCluster(ctx context.Context, t *testing.T, what string, adjust func(*devcluster.Config)) (*harness, func(), error) {
	logs := &tailBuffer{}
	cfg := devcluster.Config{
		Brokers: 3, Proxies: 1, LeaseTTL: compatLeaseTTL(),
		DefaultPartitions: partitions, AutoCreateTopics: true, StoreMemory: true,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	adjust(&cfg)
	c, err := devcluster.Start(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("start the %s cluster: %w", what, err)
	}
	closeCluster := func() {
		c.Close()
		if t.Failed() && logs.String() != "" {
			t.Logf("%s cluster log (warnings and worse):\n%s", what, logs)
		}
	}
	return &harness{ctx: ctx, tg: &devTarget{c: c}, d: h.d, kind: h.kind}, closeCluster, nil
}
