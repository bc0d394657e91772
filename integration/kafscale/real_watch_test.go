package kafscale

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// TestRealWatchSkipsNextOffset: real KafScale brokers write a next_offset
// key after every segment flush; kproxy's watch receives none of them
// (kproxy_watch_events_total{kind="other"} stays 0) although the keys are
// in etcd, read back here to prove the test can see them, and kproxy's
// routing has caught up past the revision of the last one.
func TestRealWatchSkipsNextOffset(t *testing.T) {
	const topic = "real-watch"
	e := newRealEnv(t, map[string]int32{topic: 4})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 20 { // each acks=all produce flushes a segment
		e.produceN(ctx, topic, 50)
	}
	resp, err := e.rig.Etcd.Get(ctx, "/kafscale/topics/"+topic+"/partitions/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var offsets, writes int64
	var last int64
	for _, kv := range resp.Kvs {
		if len(kv.Key) > len("next_offset") && string(kv.Key[len(kv.Key)-len("next_offset"):]) == "next_offset" {
			offsets++
			writes += kv.Version // each flush rewrites the key
			last = max(last, kv.ModRevision)
		}
	}
	if offsets == 0 {
		t.Fatalf("no next_offset key under /kafscale/topics/%s after 1,000 records: the test cannot show the watch skips them", topic)
	}
	e.waitReady(fmt.Sprintf("routing past revision %d (the last next_offset write)", last), func(r adminapi.Readiness) bool {
		return r.Synced && r.Revision >= last
	})
	other, err := testrig.ScrapeCounterWhere(ctx, e.kp.AdminAddr(), "kproxy_watch_events_total", `kind="other"`)
	if err != nil {
		t.Fatal(err)
	}
	owners, err := testrig.ScrapeCounterWhere(ctx, e.kp.AdminAddr(), "kproxy_watch_events_total", `kind="owner"`)
	if err != nil {
		t.Fatal(err)
	}
	// The watch sees none of the writes that move etcd's revision on, so it
	// learns it is current from progress notifications; it must not take
	// their absence for a stalled watch.
	resyncs, err := testrig.ScrapeCounter(ctx, e.kp.AdminAddr(), "kproxy_watch_resyncs_total")
	if err != nil {
		t.Fatal(err)
	}
	if resyncs != 0 {
		t.Errorf("kproxy's watch was restarted %v times while KafScale wrote keys outside its range", resyncs)
	}
	if other != 0 {
		t.Fatalf("kproxy's watch received %v events of kind other (%d next_offset writes to %d keys, the last at revision %d): it watches more than routing reads", other, writes, offsets, last)
	}
	if owners == 0 {
		t.Fatalf("kproxy's watch received no owner events: the brokers' partition leases did not reach it")
	}
	t.Logf("%d next_offset writes to %d keys (the last at revision %d); kproxy's watch: %v owner events, 0 other", writes, offsets, last, owners)
}
