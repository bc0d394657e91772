package kafscale

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/leasewatch/kafscale/kafscaletest"
)

// TestWatchRange: the one range the source watches holds every key
// routing reads and none of the others KafScale writes.
func TestWatchRange(t *testing.T) {
	for _, root := range []string{"/kafscale", "/other/root/"} {
		start, end := newKeys(root).watchRange()
		r := newKeys(root).root
		for _, tc := range []struct {
			key  string
			want bool
		}{
			{r + "partition-leases/orders/3", true},
			{r + "partition-leases/" + "zz/0", true},
			{r + "group-leases/g", true},
			{r + "group-leases/", true},
			{r + "metadata/snapshot", true},
			{r + "topics/orders/partitions/0/next_offset", false},
			{r + "topics/orders/config", false},
			{r + "consumers/g/offsets/orders/0", false},
			{r + "consumers/g/metadata", false},
			{r + "brokers/broker-1", false},
			{r + "assignments/orders/2", false},
			{r + "partition-leaset", false},
		} {
			if got := tc.key >= start && tc.key < end; got != tc.want {
				t.Errorf("root %q: key %q in [%q, %q) = %v, want %v", root, tc.key, start, end, got, tc.want)
			}
		}
	}
}

// TestWatchSkipsNextOffset: next_offset, offset and config keys written
// under the prefix never reach the source (zero "other" events), while a
// key inside its range that routing does not use is received and counted
// as "other". Events arrive in revision order, so once the lease written
// after them is in the table, the watch has seen everything before it.
func TestWatchSkipsNextOffset(t *testing.T) {
	_, cli := etcdtest.Start(t)
	f := startSource(t, cli)
	ctx := context.Background()
	put := func(k, v string) {
		t.Helper()
		if _, err := cli.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kafscaletest.PutSnapshot(ctx, cli, prefix, addrs(1), topics); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		put(fmt.Sprintf("%s/topics/orders/partitions/%d/next_offset", prefix, i%4), fmt.Sprint(i*100))
	}
	put(prefix+"/consumers/g/offsets/orders/0", `{"offset":3}`)
	put(prefix+"/topics/orders/config", "x")
	b, err := kafscaletest.StartBroker(ctx, cli, prefix, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Crash)
	if _, err := b.AcquirePartition(ctx, "orders", 0); err != nil {
		t.Fatal(err)
	}
	f.waitFor("orders/0 owned by 1", ownerIs(f.table, "orders", 0, 1))
	events := func(kind string) float64 { return testutil.ToFloat64(f.src.h.Events.WithLabelValues(kind)) }
	if got := events("other"); got != 0 {
		t.Fatalf("watch events of kind other = %v after 52 writes outside its range, want 0 (the watch receives keys routing does not read)", got)
	}
	if got := events("owner"); got != 1 {
		t.Fatalf("watch events of kind owner = %v, want 1", got)
	}
	put(prefix+"/metadata/unused", "x") // inside the range: received and dropped
	if _, err := b.AcquirePartition(ctx, "orders", 1); err != nil {
		t.Fatal(err)
	}
	f.waitFor("orders/1 owned by 1", ownerIs(f.table, "orders", 1, 1))
	if got := events("other"); got != 1 {
		t.Fatalf("watch events of kind other = %v after one unused key inside the watched range, want 1 (dropped events must be counted)", got)
	}
}

// TestWatchCurrentWhileOthersWrite: while KafScale writes only keys outside
// the watched range, etcd's revision moves on and the watch receives no
// event; it must still confirm it is current (progress notifications) and
// never take the silence for a stalled watch.
func TestWatchCurrentWhileOthersWrite(t *testing.T) {
	_, cli := etcdtest.Start(t)
	// A stall is 3 intervals without any answer: 1.5 s here, long beside a
	// progress answer even on a loaded machine (the fixture's 50 ms is not).
	f := startSource(t, cli, func(c *Config) { c.ProgressInterval = 500 * time.Millisecond })
	ctx := context.Background()
	var last int64
	for i := range 100 { // about 2 s: past a stall's 1.5 s
		resp, err := cli.Put(ctx, fmt.Sprintf("%s/topics/orders/partitions/%d/next_offset", prefix, i%4), fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
		time.Sleep(20 * time.Millisecond)
	}
	deadline := time.Now().Add(waitTimeout)
	for f.src.Status().Revision < last {
		if time.Now().After(deadline) {
			t.Fatalf("routing at revision %d, etcd at %d after writes outside the range: the watch did not confirm it is current", f.src.Status().Revision, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := testutilCounter(f, "kproxy_watch_resyncs_total"); n != 0 {
		t.Fatalf("the watch was restarted %v times while only keys outside its range were written", n)
	}
}
