package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire/kwiretest"
)

// TestSerialOneAtATime: in serial mode the broker works on one request per
// connection at a time. A produce sent behind a long poll on the same
// connection is not applied while the long poll waits (another connection
// sees the partition empty), and is answered after it. Without serial mode
// the produce applies at once and is answered first. The long poll reads a
// topic nothing writes to, so only its MaxWait can end it: the produce
// cannot wake it and race its own answer.
func TestSerialOneAtATime(t *testing.T) {
	for _, tc := range []struct {
		serial    bool
		wantFirst int32 // the correlation id answered first
	}{
		{serial: true, wantFirst: 1},
		{serial: false, wantFirst: 2},
	} {
		serial := tc.serial
		c := newCluster(t)
		b := c.start(1, func(cfg *Config) { cfg.SerialRequests = serial })
		admin := c.clientFor([]string{b.Addr()})
		c.createTopic(admin, "one", 1)
		c.createTopic(admin, "idle", 1)
		rc := dialRaw(t, b.Addr())
		av := kmsg.NewPtrApiVersionsRequest()
		av.ClientSoftwareName, av.ClientSoftwareVersion = "kproxy", "1"
		rc.send(av, 3, 0)
		if _, _, err := rc.recv(); err != nil {
			t.Fatalf("api versions: %v", err)
		}
		const hold = 1500 * time.Millisecond
		f := kmsg.NewPtrFetchRequest()
		f.MaxWaitMillis, f.MinBytes, f.MaxBytes, f.SessionEpoch = int32(hold/time.Millisecond), 1, 1<<20, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "idle"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 1<<20, -1
		ft.Partitions = append(ft.Partitions, fp)
		f.Topics = append(f.Topics, ft)
		rc.send(f, 11, 1)
		p := kmsg.NewPtrProduceRequest()
		p.Acks, p.TimeoutMillis = -1, 5000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "one"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = kwiretest.Batch{ProducerID: -1, LeaderEpoch: -1, FirstTimestamp: time.Now().UnixMilli(), Values: kwiretest.Values("x")}.Encode()
		pt.Partitions = append(pt.Partitions, pp)
		p.Topics = append(p.Topics, pt)
		rc.send(p, 9, 2)

		applied := false
		for deadline := time.Now().Add(hold / 2); time.Now().Before(deadline) && !applied; time.Sleep(20 * time.Millisecond) {
			applied = endOffset(t, admin, "one") > 0
		}
		if applied == serial {
			t.Fatalf("serial mode %v: produce applied while the long poll ahead of it waited: %v", serial, applied)
		}
		first, _, err := rc.recv()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := rc.recv(); err != nil {
			t.Fatal(err)
		}
		if first != tc.wantFirst {
			t.Fatalf("serial mode %v: correlation id %d answered first, want %d", serial, first, tc.wantFirst)
		}
	}
}

// endOffset is the partition's log end offset, asked on a connection of its own.
func endOffset(t *testing.T, cl *kgo.Client, topic string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	return resp.Topics[0].Partitions[0].Offset
}
