package partlog

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/broker-stub/broker/schema"
	"github.com/kproxy/kproxy/broker-stub/lease"
	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/layout"
)

// TestAcquisitionPaced: with every acquisition slot taken, an append for a
// partition not yet held is answered NOT_LEADER_OR_FOLLOWER once AcquireWait
// passes (nothing written, clients retry), not held, and succeeds once a slot
// is free.
func TestAcquisitionPaced(t *testing.T) {
	_, cli := etcdtest.Start(t)
	l := layout.New("/paced")
	logs, sess := newTestLogs(t, cli, l, 1, func(c *Config) { c.AcquiringMax, c.AcquireWait = 1, 100*time.Millisecond })
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
			t.Fatalf("refusal took %v; want it after the 100ms AcquireWait", took)
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
