package kafscalerig_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/testtools/kafscalerig"
	"github.com/kproxy/kproxy/internal/testtools/kafscalerig/rigtest"
)

// TestRealRigKillRestart: the rig's brokers are real KafScale brokers: a
// produce straight to broker 0 takes a partition lease in etcd, a SIGKILL
// leaves it to expire (10 s TTL, so it is still there at once), and the
// restarted broker answers again.
func TestRealRigKillRestart(t *testing.T) {
	r := rigtest.Start(t, kafscalerig.Config{Topics: map[string]int32{"rig": 1}, KafScaleProxy: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(append(kafscalerig.DirectOpts(r.Broker(0).Addr), kgo.DefaultProduceTopic("rig"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce to broker 0 directly: %v", err)
	}
	lease := func() string {
		resp, err := r.Etcd.Get(ctx, kafscalerig.Prefix+"/partition-leases/rig/0", clientv3.WithSerializable())
		if err != nil || len(resp.Kvs) == 0 {
			return ""
		}
		return string(resp.Kvs[0].Value)
	}
	if got := lease(); got != "0" {
		t.Fatalf("partition-leases/rig/0 after a produce to broker 0 = %q, want \"0\"", got)
	}
	if err := r.KillBroker(0); err != nil {
		t.Fatal(err)
	}
	if err := kafscalerig.Ping(ctx, r.Broker(0).Addr); err == nil {
		t.Fatal("broker 0 still answers after KillBroker")
	}
	if got := lease(); got != "0" {
		t.Fatalf("the lease went at once after SIGKILL (%q); a crash should leave it to its TTL", got)
	}
	if err := r.StartBroker(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := kafscalerig.Ping(ctx, r.KafScaleProxyAddr); err != nil {
		t.Fatalf("KafScale's own proxy: %v", err)
	}
}
