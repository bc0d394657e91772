package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/crypt"
	"github.com/kproxy/kproxy/refbroker/broker"
	"github.com/kproxy/kproxy/refbroker/store"
	"github.com/kproxy/kproxy/testkit/motokms"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// encPool is an encrypted pool: moto's KMS with alias/kproxy-test, two
// stub brokers on one store and proxies that encrypt secret-* topics.
type encPool struct {
	moto    *motokms.Server
	brokers []string
	proxies []string
	regs    []*prometheus.Registry
}

// encryptionYAML is the minimal file for endpoint, with kmsExtra
// added to its kms block and extra at its end.
func encryptionYAML(endpoint, kmsExtra, extra string) string {
	return fmt.Sprintf("kms:\n  type: aws\n  endpoint: %s\n  region: us-east-1\n%stopics:\n  - match: \"secret-*\"\n    key: alias/kproxy-test\n%s", endpoint, kmsExtra, extra)
}

// startEncPool starts an encrypted pool with proxies proxies; kmsExtra and
// extra add to the configuration file (encryptionYAML).
func startEncPool(t *testing.T, proxies int, kmsExtra, extra string) *encPool {
	t.Helper()
	p := &encPool{moto: motokms.Start(t)}
	p.moto.CreateKey(t, "alias/kproxy-test")
	file := filepath.Join(t.TempDir(), "encryption.yaml")
	if err := os.WriteFile(file, []byte(encryptionYAML(p.moto.Endpoint, kmsExtra, extra)), 0o600); err != nil {
		t.Fatal(err)
	}
	etcd, cli := etcdtest.Start(t)
	lay := layout.New("")
	st := store.NewMemory()
	for id := int32(1); id <= 2; id++ {
		b, err := broker.New(context.Background(), broker.Config{
			ID: id, Etcd: etcdtest.NewClient(t, etcd.Endpoint), Layout: lay, Store: st, LeaseTTL: 5 * time.Second,
			AutoCreateTopics: true, DefaultPartitions: 3,
		})
		if err != nil {
			t.Fatal(err)
		}
		runUntilCleanup(t, fmt.Sprint("broker ", id), b.Run)
		p.brokers = append(p.brokers, b.Addr())
	}
	for range proxies {
		reg := prometheus.NewRegistry()
		s, err := assembly.New(context.Background(), assembly.Config{
			Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", Etcd: cli, Layout: lay,
			AutoCreateTopics: true, DefaultPartitions: 3, Registry: reg, EncryptionFile: file,
		})
		if err != nil {
			t.Fatal(err)
		}
		runUntilCleanup(t, "proxy", s.Run)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = adminapi.WaitReady(ctx, s.AdminAddr(), 2)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		p.proxies = append(p.proxies, s.Addr())
		p.regs = append(p.regs, reg)
	}
	return p
}

// createTopic makes topic with 3 partitions through the proxy.
func (p *encPool) createTopic(t *testing.T, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, p.proxies[0]))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	// Raw produces do not retry: wait until every proxy routes the topic.
	for _, addr := range p.proxies {
		adm := kadm.NewClient(newClient(t, addr))
		waitFor(t, "every partition of "+topic+" has a leader via "+addr, 30*time.Second, func() bool {
			md, err := adm.Metadata(ctx, topic)
			if err != nil || md.Topics[topic].Err != nil || len(md.Topics[topic].Partitions) != 3 {
				return false
			}
			for _, p := range md.Topics[topic].Partitions {
				if p.Leader < 0 || p.Err != nil {
					return false
				}
			}
			return true
		})
	}
}

// kmsCalls is proxy i's kproxy_encryption_kms_calls_total for op and result.
func (p *encPool) kmsCalls(t *testing.T, i int, op, result string) float64 {
	t.Helper()
	mfs, err := p.regs[i].Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kproxy_encryption_kms_calls_total" {
			continue
		}
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["op"] == op && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// readAll reads topic's records through seeds (the proxy, or the brokers
// to bypass it) until it has want of them; a fetch error fails the test.
func readAll(t *testing.T, seeds []string, topic string, want int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(8<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s via %v", len(out), want, topic, seeds)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d via %v: %v", topic, p, seeds, err) })
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

// checkNoPlaintext fails if a stored record shows a value the producers
// wrote, or lacks the kproxy.enc header though its value is not null.
func checkNoPlaintext(t *testing.T, stored []*kgo.Record, plain [][]byte) {
	t.Helper()
	for _, r := range stored {
		if r.Value == nil {
			continue
		}
		if len(r.Headers) == 0 || r.Headers[len(r.Headers)-1].Key != crypt.HeaderKey {
			t.Fatalf("stored record %d/%d has no %s header", r.Partition, r.Offset, crypt.HeaderKey)
		}
		for _, v := range plain {
			if len(v) >= 8 && bytes.Contains(r.Value, v[:8]) {
				t.Fatalf("stored record %d/%d holds plaintext %q", r.Partition, r.Offset, v[:8])
			}
		}
	}
}

// rawProduce sends one batch to topic/partition through addr and returns
// the partition's error code.
func rawProduce(t *testing.T, addr, topic string, partition int32, batch []byte) int16 {
	t.Helper()
	cl := newClient(t, addr, kgo.MaxVersions(kversion.V3_0_0())) // topics by name
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parts, err := testrig.ProduceRaw(ctx, cl, topic, map[int32][]byte{partition: batch})
	if err != nil {
		t.Fatalf("produce to %s/%d via %s: %v", topic, partition, addr, err)
	}
	return parts[partition].ErrorCode
}

// waitFor polls cond every 100ms until it holds or timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
