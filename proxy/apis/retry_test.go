package apis

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/retry"
	"github.com/kproxy/kproxy/routing"
)

// produceAnswers runs a produce of spec and returns its answers by
// partition.
func produceAnswers(t *testing.T, d *Dispatcher, v int16, spec []tp) map[tp]partAnswer {
	t.Helper()
	req := partAPIs[0].build(v, spec)
	resp := roundTrip(t, d, req)
	out := map[tp]partAnswer{}
	for _, a := range partAPIs[0].resp(resp) {
		out[a.tp] = a
	}
	if len(out) != len(spec) {
		t.Fatalf("%d answers for %d partitions", len(out), len(spec))
	}
	return out
}

// notLeaderOnce refuses every partition of the first request, and moves
// the partitions it refused to newOwner in routing before answering.
func notLeaderOnce(rt *routing.Table, newOwner int32) script {
	return func(n int, req kmsg.Request) fakeReply {
		if n > 0 {
			return fakeReply{}
		}
		r := req.(*kmsg.ProduceRequest)
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range r.Topics {
			rt2 := kmsg.ProduceResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.NotLeaderForPartition.Code
				rt2.Partitions = append(rt2.Partitions, rp)
				if newOwner >= 0 {
					rt.SetOwner(t.Topic, p.Partition, newOwner)
				}
			}
			resp.Topics = append(resp.Topics, rt2)
		}
		return fakeReply{resp: resp}
	}
}

func TestProduceRetry(t *testing.T) {
	cases := []struct {
		name     string
		newOwner int32 // -1: routing does not learn of a new owner
	}{
		{"routing moved to broker 2", 2},
		{"routing stale: rendezvous avoids the refuser", -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, f, rt := newTestDispatcher(t)
			f.on(1, kmsg.Produce, notLeaderOnce(rt, c.newOwner))
			got := produceAnswers(t, d, 9, spread)
			if n := f.count(1, kmsg.Produce); n != 1 {
				t.Fatalf("refusing broker 1 got %d produce requests, want 1 (never retried there)", n)
			}
			for _, x := range spread {
				a := got[x]
				if a.code != 0 {
					t.Fatalf("%v: error %d after retry", x, a.code)
				}
				if owner(x.topic, x.part) == 1 && a.val/1000 == 1 {
					t.Fatalf("%v answered by the refusing broker", x)
				}
				if c.newOwner == 2 && owner(x.topic, x.part) == 1 && a.val != value(2, x.part) {
					t.Fatalf("%v: answered %d, want broker 2's %d", x, a.val, value(2, x.part))
				}
			}
			if v := testutil.ToFloat64(d.m.retries.WithLabelValues("Produce", "NOT_LEADER_FOR_PARTITION")); v != 3 {
				t.Fatalf("retries metric = %v, want 3 (one per refused partition)", v)
			}
		})
	}
}

func TestProduceAmbiguousIsNotRetried(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	f.on(2, kmsg.Produce, func(int, kmsg.Request) fakeReply {
		return fakeReply{err: errors.New("connection reset after write")}
	})
	got := produceAnswers(t, d, 7, spread)
	for _, x := range spread {
		a := got[x]
		switch {
		case owner(x.topic, x.part) == 2 && a.code != kerr.RequestTimedOut.Code:
			t.Fatalf("%v: code %d, want REQUEST_TIMED_OUT", x, a.code)
		case owner(x.topic, x.part) != 2 && a.code != 0:
			t.Fatalf("%v: code %d, want success", x, a.code)
		}
	}
	if n := len(f.requests(kmsg.Produce)); n != 3 {
		t.Fatalf("%d produce requests, want 3 (no retry of an ambiguous attempt)", n)
	}
}

func TestProduceNotSentIsRetried(t *testing.T) {
	d, f, rt := newTestDispatcher(t)
	f.on(3, kmsg.Produce, func(n int, _ kmsg.Request) fakeReply {
		rt.DeleteBroker(3)
		return fakeReply{sendErr: fmt.Errorf("dial: %w", retry.ErrNotSent)}
	})
	got := produceAnswers(t, d, 8, spread)
	for _, x := range spread {
		if a := got[x]; a.code != 0 || a.val/1000 == 3 {
			t.Fatalf("%v: %+v, want success from a live broker", x, a)
		}
	}
	if n := f.count(3, kmsg.Produce); n != 1 {
		t.Fatalf("dead broker 3 got %d attempts, want 1", n)
	}
}

func TestProduceRetriesRunOut(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	for b := int32(1); b <= 3; b++ {
		f.on(b, kmsg.Produce, func(int, kmsg.Request) fakeReply {
			return fakeReply{sendErr: fmt.Errorf("pool closed: %w", retry.ErrNotSent)}
		})
	}
	got := produceAnswers(t, d, 9, spread)
	for _, x := range spread {
		if got[x].code != kerr.NotLeaderForPartition.Code {
			t.Fatalf("%v: code %d, want NOT_LEADER_OR_FOLLOWER once retries run out", x, got[x].code)
		}
	}
	attempts := 0
	for _, s := range f.requests(kmsg.Produce) {
		attempts += len(partAPIs[0].parts(s.req))
	}
	if want := 5 * len(spread); attempts != want {
		t.Fatalf("%d partition attempts, want MaxAttempts (5) per partition = %d", attempts, want)
	}
}

func TestProduceAcksZero(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	req := partAPIs[0].build(9, spread).(*kmsg.ProduceRequest)
	req.Acks = 0
	reply, err := call(t, d, req)
	if err != nil || !reply.NoResponse || reply.Body != nil {
		t.Fatalf("acks=0: reply %+v, err %v; want NoResponse", reply, err)
	}
	if n := len(f.requests(kmsg.Produce)); n != 3 {
		t.Fatalf("%d sub-requests, want 3", n)
	}
	f.mu.Lock()
	waits := f.waits
	f.mu.Unlock()
	if waits != 0 {
		t.Fatalf("waited %d times for acks=0 answers that never come", waits)
	}

	// A partition the proxy cannot route closes the connection, as Kafka does.
	req.Topics = append(req.Topics, kmsg.ProduceRequestTopic{Topic: "nope", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0}}})
	if _, err := call(t, d, req); err == nil {
		t.Fatal("acks=0 to an unknown topic: want an error (close the connection)")
	}
}

func TestUnknownTopicAnsweredLocally(t *testing.T) {
	for _, v := range []int16{3, 12, 13} {
		d, f, _ := newTestDispatcher(t)
		spec := []tp{{"t", 0}, {"nope", 1}, {"t", 99}}
		req := partAPIs[0].build(v, spec)
		got := partAPIs[0].resp(roundTrip(t, d, req))
		unknown := kerr.UnknownTopicOrPartition.Code
		if v >= 13 {
			unknown = kerr.UnknownTopicID.Code
		}
		if got[0].code != 0 || got[1].code != kerr.UnknownTopicOrPartition.Code || got[2].code != unknown {
			if !(v >= 13 && got[2].code == kerr.UnknownTopicOrPartition.Code && got[1].code == 0) {
				t.Fatalf("v%d: answers %+v", v, got)
			}
		}
		if n := len(f.requests(kmsg.Produce)); n != 1 {
			t.Fatalf("v%d: %d sub-requests, want 1 (only the known partition)", v, n)
		}
	}
}

// TestProduceLeaderHintRewritten: when retries run out, a refusal's
// KIP-951 leader hint must name the proxy, never a broker.
func TestProduceLeaderHintRewritten(t *testing.T) {
	d, f, _ := newTestDispatcher(t, func(c *Config) { c.Retry.MaxAttempts = 1 })
	f.on(1, kmsg.Produce, func(_ int, req kmsg.Request) fakeReply {
		r := req.(*kmsg.ProduceRequest)
		resp := f.okResponse(1, r).(*kmsg.ProduceResponse)
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				p := &resp.Topics[i].Partitions[j]
				p.ErrorCode = kerr.NotLeaderForPartition.Code
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 2, 6
			}
		}
		resp.Brokers = []kmsg.ProduceResponseBroker{{NodeID: 2, Host: "b2", Port: 9092}}
		return fakeReply{resp: resp}
	})
	resp := roundTrip(t, d, partAPIs[0].build(12, spread)).(*kmsg.ProduceResponse)
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != proxyID || resp.Brokers[0].Host != "proxy.local" {
		t.Fatalf("node endpoints %+v, want only the proxy", resp.Brokers)
	}
	hinted := 0
	for _, tt := range resp.Topics {
		for _, p := range tt.Partitions {
			if p.CurrentLeader.LeaderID >= 0 {
				hinted++
				if p.CurrentLeader.LeaderID != proxyID || p.CurrentLeader.LeaderEpoch != 6 {
					t.Fatalf("partition %d hint %+v, want the proxy at epoch 6", p.Partition, p.CurrentLeader)
				}
			}
		}
	}
	if hinted != 3 {
		t.Fatalf("%d hinted partitions, want broker 1's 3", hinted)
	}
}

func TestFetchLeaderHintAndReplicaRewritten(t *testing.T) {
	d, f, _ := newTestDispatcher(t, func(c *Config) { c.Retry.MaxAttempts = 1 })
	f.on(2, kmsg.Fetch, func(_ int, req kmsg.Request) fakeReply {
		resp := f.okResponse(2, req).(*kmsg.FetchResponse)
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				p := &resp.Topics[i].Partitions[j]
				p.ErrorCode = kerr.NotLeaderForPartition.Code
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 3, 9
				p.PreferredReadReplica = 3
			}
		}
		resp.Brokers = []kmsg.FetchResponseBroker{{NodeID: 3, Host: "b3", Port: 9092}}
		return fakeReply{resp: resp}
	})
	req := partAPIs[1].build(16, spread)
	resp := roundTrip(t, d, req).(*kmsg.FetchResponse)
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != proxyID {
		t.Fatalf("node endpoints %+v, want only the proxy", resp.Brokers)
	}
	for _, tt := range resp.Topics {
		for _, p := range tt.Partitions {
			if p.PreferredReadReplica != -1 || (p.CurrentLeader.LeaderID != -1 && p.CurrentLeader.LeaderID != proxyID) {
				t.Fatalf("partition %d leaks a broker: %+v", p.Partition, p)
			}
		}
	}
}

func TestFetchIsSessionless(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	req := partAPIs[1].build(12, spread).(*kmsg.FetchRequest)
	req.SessionID, req.SessionEpoch = 77, 3
	req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "t", Partitions: []int32{2}}}
	resp := roundTrip(t, d, req).(*kmsg.FetchResponse)
	if resp.SessionID != 0 {
		t.Fatalf("client got session id %d, want 0", resp.SessionID)
	}
	for _, s := range f.requests(kmsg.Fetch) {
		r := s.req.(*kmsg.FetchRequest)
		if r.SessionID != 0 || r.SessionEpoch != -1 || len(r.ForgottenTopics) != 0 {
			t.Fatalf("broker %d got session %d/%d forgotten %v", s.broker, r.SessionID, r.SessionEpoch, r.ForgottenTopics)
		}
		if int64(r.MaxBytes) > (int64(req.MaxBytes)+2)/3 {
			t.Fatalf("broker %d got MaxBytes %d, want a third of %d", s.broker, r.MaxBytes, req.MaxBytes)
		}
	}
}

// TestFetchEarlyReturn: broker 1 has data, brokers 2 and 3 long-poll with
// nothing (their fakes block until their context ends, so Finish can only
// return if it did not wait for them).
func TestFetchEarlyReturn(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	f.on(2, kmsg.Fetch, func(int, kmsg.Request) fakeReply { return fakeReply{idle: true} })
	f.on(3, kmsg.Fetch, func(int, kmsg.Request) fakeReply { return fakeReply{idle: true} })
	req := partAPIs[1].build(11, spread).(*kmsg.FetchRequest)
	req.MinBytes, req.MaxWaitMillis = 1, 60_000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := d.Begin(ctx, 1, Header{Key: req.Key(), Version: req.Version}, req.AppendTo(nil))
	reply, err := c.Finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("Finish waited for the idle brokers")
	}
	// The idle brokers' long polls outlive Finish (parked for the
	// connection's next fetch); the connection's end ends them.
	select {
	case e := <-f.idleEnd:
		t.Fatalf("an idle broker's wait ended with Finish (%v); want it parked", e)
	default:
	}
	cancel()
	for range 2 {
		select {
		case e := <-f.idleEnd:
			if !errors.Is(e, context.Canceled) {
				t.Fatalf("idle broker's wait ended with %v, want cancellation with the connection", e)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("idle broker's wait was not ended with the connection")
		}
	}
	resp := decodeReply(t, req, replyBytes(reply)).(*kmsg.FetchResponse)
	got := partAPIs[1].resp(resp)
	want := []tp{{"t", 0}, {"t", 9}, {"t", 3}} // broker 1's, in the client's order
	if len(got) != len(want) {
		t.Fatalf("answered %v, want only broker 1's partitions %v", got, want)
	}
	for i := range want {
		if got[i].tp != want[i] || got[i].val != value(1, want[i].part) {
			t.Fatalf("answer %d = %+v, want %v from broker 1", i, got[i], want[i])
		}
	}
	if v := testutil.ToFloat64(d.m.early); v != 1 {
		t.Fatalf("early return metric = %v", v)
	}
}

// TestFetchRetryNotLeader: a refused partition is fetched again from the
// fresh owner within MaxWait.
func TestFetchRetryNotLeader(t *testing.T) {
	d, f, rt := newTestDispatcher(t)
	f.on(3, kmsg.Fetch, func(n int, req kmsg.Request) fakeReply {
		resp := f.okResponse(3, req).(*kmsg.FetchResponse)
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				p := &resp.Topics[i].Partitions[j]
				p.ErrorCode, p.RecordBatches = kerr.NotLeaderForPartition.Code, nil
				rt.SetOwner(resp.Topics[i].Topic, p.Partition, 1)
			}
		}
		return fakeReply{resp: resp}
	})
	req := partAPIs[1].build(12, spread)
	resp := roundTrip(t, d, req)
	for _, a := range partAPIs[1].resp(resp) {
		if a.code != 0 || a.val/1000 == 3 {
			t.Fatalf("%+v: want success from a broker other than 3", a)
		}
	}
	if n := f.count(3, kmsg.Fetch); n != 1 {
		t.Fatalf("refusing broker got %d fetches", n)
	}
}

// TestFetchNullRecordsBecomeEmpty: librdkafka rejects a whole fetch
// response whose records are null, so the proxy sends empty ones.
func TestFetchNullRecordsBecomeEmpty(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	f.on(1, kmsg.Fetch, func(_ int, req kmsg.Request) fakeReply {
		resp := f.okResponse(1, req).(*kmsg.FetchResponse)
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].RecordBatches = nil
			}
		}
		return fakeReply{resp: resp}
	})
	for _, v := range []int16{4, 12} {
		// From a broker, and answered by the proxy (unknown topic).
		for _, spec := range [][]tp{{{"t", 0}, {"t", 3}}, {{"nope", 0}}} {
			req := partAPIs[1].build(v, spec)
			resp := roundTrip(t, d, req).(*kmsg.FetchResponse)
			n := 0
			for _, tt := range resp.Topics {
				for _, p := range tt.Partitions {
					n++
					if p.RecordBatches == nil {
						t.Fatalf("v%d: %s/%d has null records", v, tt.Topic, p.Partition)
					}
				}
			}
			if n != len(spec) {
				t.Fatalf("v%d: %d partitions answered, want %d", v, n, len(spec))
			}
		}
	}
}

// TestFetchErrorDoesNotStarve: a partition the proxy answers with an error
// at once must not cut off the other brokers' data.
func TestFetchErrorDoesNotStarve(t *testing.T) {
	d, _, _ := newTestDispatcher(t)
	req := partAPIs[1].build(12, []tp{{"nope", 0}, {"t", 0}, {"t", 1}, {"t", 2}}).(*kmsg.FetchRequest)
	req.MinBytes = 1
	got := partAPIs[1].resp(roundTrip(t, d, req))
	data := 0
	for _, a := range got {
		if a.code == 0 {
			data++
		}
	}
	if data == 0 || got[0].code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("answers %+v: want the error and broker data", got)
	}
}

// TestFetchGraceCollectsOtherBrokers: once MinBytes is in hand, brokers
// that answer within the grace still make it into the answer. The clock
// is frozen, so the grace never ends and the test does not depend on
// timing: broker 2's gated answer must be waited for.
func TestFetchGraceCollectsOtherBrokers(t *testing.T) {
	frozen := time.Unix(1_000_000, 0)
	d, f, _ := newTestDispatcher(t, func(c *Config) { c.Now = func() time.Time { return frozen } })
	gate := make(chan struct{})
	f.on(2, kmsg.Fetch, func(_ int, req kmsg.Request) fakeReply {
		return fakeReply{resp: f.okResponse(2, req), gate: gate}
	})
	req := partAPIs[1].build(12, []tp{{"t", 0}, {"t", 1}}).(*kmsg.FetchRequest)
	req.MinBytes = 1
	ctx := context.Background()
	c := d.Begin(ctx, 1, Header{Key: req.Key(), Version: req.Version}, req.AppendTo(nil))
	close(gate)
	reply, err := c.Finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := partAPIs[1].resp(decodeReply(t, req, replyBytes(reply))); len(got) != 2 {
		t.Fatalf("answered %+v, want both brokers' data", got)
	}
}
