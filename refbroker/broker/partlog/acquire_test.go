package partlog

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/lease"
	"github.com/kproxy/kproxy/refbroker/broker/pacer"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

// TestAcquisitionPaced: with every acquisition slot taken, an append for a
// partition not yet held is answered NOT_LEADER_OR_FOLLOWER once the pacer's wait
// passes (nothing written, clients retry), not held, and succeeds once a slot
// is free.
func TestAcquisitionPaced(t *testing.T) {
	_, cli := etcdtest.Start(t)
	l := layout.New("/paced")
	var refused []pacer.Kind
	p := pacer.New(pacer.Config{Max: 1, Wait: 100 * time.Millisecond, Refused: func(k pacer.Kind) { refused = append(refused, k) }})
	logs, sess := newTestLogs(t, cli, l, 1, func(c *Config) { c.Pacer = p })
	batches, perr := ParseProduce(testBatch(-1, -1, -1, 1, "a"))
	if perr != nil {
		t.Fatal(perr.Msg)
	}
	tp := TP{Topic: "paced", Partition: 0}

	if !p.Take(context.Background(), pacer.Group) { // etcd "busy": the one slot is taken
		t.Fatal("the one free slot was refused")
	}
	start := time.Now()
	select {
	case r := <-logs.Append(tp, batches):
		if r.Code != kerr.NotLeaderForPartition.Code {
			t.Fatalf("append while acquisitions are full = %+v; want NOT_LEADER_OR_FOLLOWER", r)
		}
		if took := time.Since(start); took < 100*time.Millisecond || took > time.Second {
			t.Fatalf("refusal took %v; want it after the 100ms wait, well within 1s", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("append held while no acquisition slot was free")
	}
	if _, ok := sess.Owns(lease.PartitionResource(l, tp.Topic, tp.Partition, schema.New(l).PartitionStateKey(tp.Topic, tp.Partition))); ok {
		t.Fatal("partition acquired although no slot was free")
	}

	if len(refused) != 1 || refused[0] != pacer.Partition {
		t.Fatalf("refusals counted = %v; want one partition", refused)
	}
	p.Release()
	select {
	case r := <-logs.Append(tp, batches):
		if r.Code != 0 || r.BaseOffset != 0 {
			t.Fatalf("append with a free slot = %+v; want offset 0", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("append with a free slot did not finish")
	}
}
