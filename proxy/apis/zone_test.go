package apis

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/zone"
	"github.com/kproxy/kproxy/routing"
)

// zonedDispatcher is testTable with broker n in zone "z<n>".
func zonedDispatcher(t *testing.T, zoneReads bool, mutate ...func(*Config)) (*Dispatcher, *fakeSender) {
	d, f, rt := newTestDispatcher(t, mutate...)
	for id := int32(1); id <= 3; id++ {
		b, _ := rt.Broker(id)
		b.Rack = "z" + string(rune('0'+id))
		rt.SetBroker(b)
	}
	rt.SetZoneReads(zoneReads)
	return d, f
}

// fetchAll fetches every partition of "t" at version v with rack.
func fetchAll(v int16, rack string) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(v)
	req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch, req.Rack = 0, 1<<20, -1, rack
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = "t", topicID("t")
	for p := range int32(16) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// callAs runs req for a client with clientID connected from addr.
func callAs(t *testing.T, d *Dispatcher, req kmsg.Request, clientID, addr string) kmsg.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ci := NewConnInfo("PLAINTEXT", "proxy.local", 9092)
	ci.Client = addr
	ctx = WithConnInfo(ctx, ci)
	reply, err := d.Begin(ctx, 42, Header{Key: req.Key(), Version: req.GetVersion(), CorrelationID: 1, ClientID: &clientID}, req.AppendTo(nil)).Finish(ctx)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	return decodeReply(t, req, replyBytes(reply))
}

// TestFetchZoneRouting: with zone reads, every partition of a fetch goes to
// the one broker of the client's zone, whichever clue named the zone (in
// the documented order), and is counted as zone-local; without a zone, or
// with zone reads off, each goes to its owner.
func TestFetchZoneRouting(t *testing.T) {
	ranges, err := zone.ParseRanges("10.0.2.0/24=z2")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		zoneReads  bool
		own        string // the proxy's zone
		v          int16
		rack, id   string
		addr       string
		want       int32 // the one broker every partition goes to; 0: each to its owner
		wantSource zone.Source
	}{
		{"rack", true, "", 12, "z3", "zone=z1", "10.0.2.9", 3, zone.Rack},
		{"client.id before address (v10 has no rack)", true, "", 10, "", "app,ws_az=z1", "10.0.2.9", 1, zone.ClientID},
		{"address range", true, "z3", 12, "", "app", "10.0.2.9", 2, zone.Address},
		{"proxy's zone", true, "z1", 12, "", "app", "192.168.0.1", 1, zone.Proxy},
		{"no zone: owners", true, "", 12, "", "app", "", 0, zone.None},
		{"zone reads off: owners", false, "z1", 12, "z3", "", "", 0, zone.Rack},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, f := zonedDispatcher(t, c.zoneReads, func(cfg *Config) { cfg.Zones = zone.Resolver{Ranges: ranges, Own: c.own} })
			resp := callAs(t, d, fetchAll(c.v, c.rack), c.id, c.addr).(*kmsg.FetchResponse)
			for _, p := range resp.Topics[0].Partitions {
				want := c.want
				if want == 0 {
					want = owner("t", p.Partition)
				}
				if p.ErrorCode != 0 || len(p.RecordBatches) == 0 || int32(p.RecordBatches[0]) != want {
					t.Errorf("partition %d answered by broker %v (code %d), want %d", p.Partition, p.RecordBatches, p.ErrorCode, want)
				}
			}
			if c.want == 0 {
				return
			}
			if n := len(f.requests(kmsg.Fetch)); n != 1 {
				t.Errorf("%d sub-requests, want 1 to broker %d", n, c.want)
			}
			// Of 16 partitions, broker n owns those with p%3 == n-1.
			owned := 0
			for p := range int32(16) {
				if owner("t", p) == c.want {
					owned++
				}
			}
			m := d.m
			if got := testutil.ToFloat64(m.fetchRoutes.WithLabelValues("zone", c.wantSource.String())); got != float64(16-owned) {
				t.Errorf("fetch routes to zone by %v: %v, want %d", c.wantSource, got, 16-owned)
			}
			if got := testutil.ToFloat64(m.fetchRoutes.WithLabelValues("owner", routing.ReadOwnerInZone.String())); got != float64(owned) {
				t.Errorf("fetch routes to the owner in zone: %v, want %d", got, owned)
			}
			if local, cross := testutil.ToFloat64(m.upBytes.WithLabelValues("Fetch", "true")), testutil.ToFloat64(m.upBytes.WithLabelValues("Fetch", "false")); local == 0 || cross != 0 {
				t.Errorf("fetch bytes zone-local %v, cross-zone %v: want all local", local, cross)
			}
		})
	}
}

// TestFetchZoneFallsBackToOwner: a zone broker's refusal moves the fetch to
// the usual route, and bytes to a broker of another zone count as
// cross-zone.
func TestFetchZoneFallsBackToOwner(t *testing.T) {
	d, f := zonedDispatcher(t, true)
	f.on(3, kmsg.Fetch, func(n int, req kmsg.Request) fakeReply {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range req.(*kmsg.FetchRequest).Topics {
			t := kmsg.FetchResponseTopic{Topic: rt.Topic, TopicID: rt.TopicID}
			for _, rp := range rt.Partitions {
				p := kmsg.NewFetchResponseTopicPartition()
				p.Partition, p.ErrorCode = rp.Partition, 6 // NOT_LEADER_OR_FOLLOWER: a definite refusal
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return fakeReply{resp: resp}
	})
	req := fetchAll(12, "z3")
	req.MaxWaitMillis = 2000 // the retry budget
	resp := callAs(t, d, req, "", "").(*kmsg.FetchResponse)
	for _, p := range resp.Topics[0].Partitions {
		if want := owner("t", p.Partition); want != 3 && (p.ErrorCode != 0 || int32(p.RecordBatches[0]) != want) {
			t.Errorf("partition %d answered by %v (code %d) after zone 3 refused, want its owner %d", p.Partition, p.RecordBatches, p.ErrorCode, want)
		}
	}
	if got := testutil.ToFloat64(d.m.fetchRoutes.WithLabelValues("owner", routing.ReadZoneRefused.String())); got == 0 {
		t.Error("no fetch counted as routed to the owner after the zone refused")
	}
	if cross := testutil.ToFloat64(d.m.upBytes.WithLabelValues("Fetch", "false")); cross == 0 {
		t.Error("bytes to owners in other zones not counted as cross-zone")
	}
}

// TestProduceAcquireInZone: with zone-affine acquisition, a produce to a
// partition nobody owns goes to the broker of the producer's zone (named in
// client.id), one to an owned partition to its owner.
func TestProduceAcquireInZone(t *testing.T) {
	d, f := zonedDispatcher(t, true)
	d.routes.SetAcquireInZone(true)
	d.routes.SetOwner("t", 0, -1) // partition 0 loses its owner key
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = -1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	for _, p := range []int32{0, 1} {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, []byte{}
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	callAs(t, d, req, "app,zone=z3", "")
	got := map[int32]int32{}
	for _, s := range f.requests(kmsg.Produce) {
		for _, st := range s.req.(*kmsg.ProduceRequest).Topics {
			for _, sp := range st.Partitions {
				got[sp.Partition] = s.broker
			}
		}
	}
	if got[0] != 3 || got[1] != owner("t", 1) {
		t.Fatalf("produce routed %v, want partition 0 (unowned) to 3 in the producer's zone and 1 to its owner %d", got, owner("t", 1))
	}
}

// TestZoneReadWatermarkNeverGoesDown: a client whose fetches of a partition
// move to a broker that trails (zone 3's broker answered first; then the
// client's zone is zone 1, whose broker's watermarks are lower) gets the
// highest watermark passed on before, with the trailing broker's records;
// without zone reads answers pass unchanged.
func TestZoneReadWatermarkNeverGoesDown(t *testing.T) {
	for _, zoneReads := range []bool{true, false} {
		d, _ := zonedDispatcher(t, zoneReads)
		first := callAs(t, d, fetchAll(12, "z3"), "", "").(*kmsg.FetchResponse)
		then := callAs(t, d, fetchAll(12, "z1"), "", "").(*kmsg.FetchResponse)
		// A partition whose broker missed the early answer's grace is left
		// out of that answer (fetch.go), so it has no watermark passed on
		// to hold: match the answers by partition, not by position.
		passed := map[int32]int64{}
		for _, p := range first.Topics[0].Partitions {
			passed[p.Partition] = p.HighWatermark
		}
		raised := 0
		for _, p := range then.Topics[0].Partitions {
			before, ok := passed[p.Partition]
			from := int32(p.RecordBatches[0]) // the broker that answered
			want := value(from, p.Partition)
			if zoneReads && ok {
				want = max(want, before)
			}
			if p.ErrorCode != 0 || p.HighWatermark != want {
				t.Errorf("zone reads %v, partition %d: high watermark %d from broker %d (code %d) after %d, want %d",
					zoneReads, p.Partition, p.HighWatermark, from, p.ErrorCode, before, want)
			}
			if p.HighWatermark != value(from, p.Partition) {
				raised++
			}
		}
		if zoneReads && raised == 0 {
			t.Error("no watermark raised: the test did not move fetches to a trailing broker")
		}
		if got := testutil.ToFloat64(d.m.floorRaised); got != float64(raised) {
			t.Errorf("zone reads %v: %v raises counted, want %d", zoneReads, got, raised)
		}
	}
}
