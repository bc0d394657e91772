package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/testkit/testrig"
)

func buildKproxy(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kproxy")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := testrig.Build(ctx, "", testrig.Target{Pkg: testrig.KproxyPkg, Out: bin}); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestSeparateProcesses runs brokers and the proxy as their own processes
// against an etcd they do not embed, and kills and restarts them one by one
// while a client keeps producing: every acknowledged record stays readable.
func TestSeparateProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and waits out a lease TTL")
	}
	bin := buildKproxy(t)
	etcd, cli := etcdtest.Start(t)
	logDir := t.TempDir()
	rig, err := testrig.NewCluster(testrig.ClusterConfig{Kproxy: bin, LogDir: logDir, Etcd: cli,
		EtcdEndpoints: []string{etcd.Endpoint}, Store: t.TempDir(), LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rig.Close(10 * time.Second); err != nil {
			t.Errorf("stop processes: %v", err)
		}
		if t.Failed() {
			t.Logf("process logs are in %s", logDir)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for id := int32(1); id <= 3; id++ {
		if _, err := rig.AddBroker(id, nil); err != nil {
			t.Fatal(err)
		}
	}
	px, err := rig.AddProxy()
	if err != nil {
		t.Fatal(err)
	}
	if err := rig.StartAll(ctx); err != nil {
		t.Fatal(err)
	}
	proxyAddr := px.Addr

	const topic = "procs"
	cl := newClient(t, proxyAddr, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	var produced []record
	produce := func(n int, tag string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for i := 0; i < n; i++ {
			r, err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i % 5)), Value: []byte(fmt.Sprintf("%s-%d", tag, i))}).First()
			if err != nil {
				t.Fatalf("produce %s-%d: %v", tag, i, err)
			}
			produced = append(produced, record{r.Partition, r.Offset, string(r.Value)})
		}
	}

	produce(50, "before")
	owners, err := rig.Owners(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	victim, ok := owners[produced[0].partition]
	if !ok {
		t.Fatalf("%s/%d has no owner", topic, produced[0].partition)
	}
	if err := rig.Brokers[victim-1].Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	produce(50, "after-kill") // waits out the victim's lease through the client's retries
	if err := rig.StartBroker(ctx, rig.Brokers[victim-1]); err != nil {
		t.Fatal(err)
	}
	if err := px.Proc.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := rig.StartProxy(ctx, px, 3); err != nil {
		t.Fatal(err)
	}
	produce(50, "after-restarts")

	checkSame(t, produced, consumeAll(t, proxyAddr, topic, len(produced), 60*time.Second))
}
