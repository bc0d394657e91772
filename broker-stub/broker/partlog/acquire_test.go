package partlog

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/broker-stub/broker/schema"
	"github.com/kproxy/kproxy/broker-stub/lease"
	"github.com/kproxy/kproxy/broker-stub/store"
	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/layout"
)

// TestAcquisitionPaced: with every acquisition slot taken, an append for a
// partition not yet held is answered NOT_LEADER_OR_FOLLOWER at once (nothing
// written, clients retry), and succeeds once a slot is free.
func TestAcquisitionPaced(t *testing.T) {
	_, cli := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := layout.New("/paced")
	sess, err := lease.NewSession(ctx, lease.Config{Client: cli, Layout: l, BrokerID: 1, TTL: 2 * time.Second, SafetyMargin: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	logs := NewLogs(Config{Session: sess, Etcd: cli, Layout: l, Store: store.NewMemory(), View: NewView(l, nil), AcquiringMax: 1})
	defer logs.Close(ctx)
	batches, perr := ParseProduce(testBatch(-1, -1, -1, 1, "a"))
	if perr != nil {
		t.Fatal(perr.Msg)
	}
	tp := TP{Topic: "paced", Partition: 0}

	logs.acquiring <- struct{}{} // etcd "busy": the one slot is taken
	start := time.Now()
	select {
	case r := <-logs.Append(tp, batches):
		if r.Code != kerr.NotLeaderForPartition.Code {
			t.Fatalf("append while acquisitions are full = %+v; want NOT_LEADER_OR_FOLLOWER", r)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("refusal took %v; want it at once", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("append held while no acquisition slot was free")
	}
	if _, ok := sess.Owns(lease.PartitionResource(l, tp.Topic, tp.Partition, schema.New(l).PartitionStateKey(tp.Topic, tp.Partition))); ok {
		t.Fatal("partition acquired although no slot was free")
	}

	<-logs.acquiring
	select {
	case r := <-logs.Append(tp, batches):
		if r.Code != 0 || r.BaseOffset != 0 {
			t.Fatalf("append with a free slot = %+v; want offset 0", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("append with a free slot did not finish")
	}
}
