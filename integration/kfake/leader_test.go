package kfake

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLeaderMoves moves a partition's leader in kfake while a kgo producer
// writes through the proxy, and updates etcd (the owner key and the epoch)
// before, right after, or well after the move: the producer must see no
// error, and every acknowledged record must be readable, through the proxy
// and from kfake directly, by a consumer that kept reading throughout. The
// broker must never see the producer's requests out of order: kgo reports
// an OUT_OF_ORDER_SEQUENCE_NUMBER (or a producer id or epoch the broker
// lost) as data loss, which the proxy's retries once caused (issue 27).
func TestLeaderMoves(t *testing.T) {
	const topic, parts = "moves", 3
	e := newEnv(t, topicSpec{topic, parts})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	// A short produce timeout bounds the proxy's retries of one produce.
	var lossMu sync.Mutex
	losses := map[int32]int{}
	prod := e.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.ProduceRequestTimeout(time.Second), kgo.ProducerOnDataLossDetected(func(_ string, p int32) {
			lossMu.Lock()
			losses[p]++
			lossMu.Unlock()
		}))
	reader := startReader(ctx, e.client(kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(250*time.Millisecond)))
	var all []rec

	cases := []struct {
		name string
		// move moves p's leader to broker to in kfake and publishes it in
		// etcd, in this case's order.
		move func(t *testing.T, e *env, p, to int32)
	}{
		{"etcd-before-kfake", func(t *testing.T, e *env, p, to int32) {
			// The proxy sends to the new owner before kfake made it leader:
			// NOT_LEADER_OR_FOLLOWER from the new owner until the move.
			retried := e.retries("Produce", kerr.NotLeaderForPartition.Message)
			e.waitRoutes(e.publishPartition(ctx, topic, p, partState{leader: to, epoch: e.partitions(ctx, topic)[p].epoch + 1}))
			e.waitRetry(t, "Produce", kerr.NotLeaderForPartition.Message, retried)
			if err := e.fake.MoveTopicPartition(topic, p, to); err != nil {
				t.Fatalf("kfake move %s/%d to %d: %v", topic, p, to, err)
			}
		}},
		{"etcd-right-after-kfake", func(t *testing.T, e *env, p, to int32) {
			if err := e.fake.MoveTopicPartition(topic, p, to); err != nil {
				t.Fatalf("kfake move %s/%d to %d: %v", topic, p, to, err)
			}
			e.waitRoutes(e.republish(ctx, topic, p))
		}},
		{"etcd-late", func(t *testing.T, e *env, p, to int32) {
			// etcd still names the old leader: the proxy must keep retrying
			// NOT_LEADER_OR_FOLLOWER answers until routing catches up.
			retried := e.retries("Produce", kerr.NotLeaderForPartition.Message)
			if err := e.fake.MoveTopicPartition(topic, p, to); err != nil {
				t.Fatalf("kfake move %s/%d to %d: %v", topic, p, to, err)
			}
			e.waitRetry(t, "Produce", kerr.NotLeaderForPartition.Message, retried)
			e.waitRoutes(e.republish(ctx, topic, p))
		}},
		{"etcd-stale-past-proxy-retries", func(t *testing.T, e *env, p, to int32) {
			// Routing stays stale longer than the proxy retries one produce
			// (its budget is the produce timeout, 1s here), so
			// NOT_LEADER_OR_FOLLOWER, with kfake's current-leader hints,
			// reaches the client, which must retry through the proxy and
			// never dial kfake (env.client's guard). The wait is the
			// subject here, not a stand-in for an event.
			retried := e.retries("Produce", kerr.NotLeaderForPartition.Message)
			if err := e.fake.MoveTopicPartition(topic, p, to); err != nil {
				t.Fatalf("kfake move %s/%d to %d: %v", topic, p, to, err)
			}
			e.waitRetry(t, "Produce", kerr.NotLeaderForPartition.Message, retried)
			time.Sleep(2500 * time.Millisecond)
			e.waitRoutes(e.republish(ctx, topic, p))
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := e.in(t)
			p := int32(i % parts)
			from := e.fake.LeaderFor(topic, p)
			to := (from + 1) % numBrokers
			w := startWriter(ctx, prod, topic, parts, tc.name)
			// Stopped and counted even when the case fails: a writer left
			// running wrote on under the later cases, and the final
			// consumers, which read as many records as were acknowledged,
			// then stopped early on its records and reported acknowledged
			// ones of other partitions as lost.
			defer func() {
				reader.cl.ResumeFetchPartitions(map[string][]int32{topic: {p}})
				acks := w.stop(t)
				t.Logf("%s: moved %s/%d from broker %d to %d; %d acks", tc.name, topic, p, from, to, len(acks))
				all = append(all, acks...)
			}()
			w.waitAcks(t, p, 30)
			// kfake answers OffsetForLeaderEpoch for an older epoch with -1
			// until a batch of the new epoch exists (Kafka answers the log
			// end): a consumer validating its position in that window
			// reports data loss and rewinds, with or without the proxy. The
			// reader skips that window on the moved partition only.
			reader.cl.PauseFetchPartitions(map[string][]int32{topic: {p}})
			tc.move(t, e, p, to)
			if got := e.fake.LeaderFor(topic, p); got != to {
				t.Fatalf("kfake leader of %s/%d is %d after the move, want %d", topic, p, got, to)
			}
			w.waitAcks(t, p, 30) // acknowledged by the new leader
		})
	}

	got := reader.waitAndStop(t, len(all))
	checkAcked(t, "consumer that read through the moves", all, got)
	viaProxy := consumeFromStart(ctx, t, e.client, topic, len(all))
	checkAcked(t, "consumed via proxy after the moves", all, viaProxy)
	direct := consumeFromStart(ctx, t, func(o ...kgo.Opt) *kgo.Client { return newKgo(t, e.fake.ListenAddrs(), o...) }, topic, len(all))
	sameRecords(t, "via proxy vs kfake direct", viaProxy, direct)
	lossMu.Lock()
	defer lossMu.Unlock()
	if len(losses) > 0 {
		t.Errorf("the producer detected data loss (OUT_OF_ORDER_SEQUENCE_NUMBER or a lost producer id) per partition: %v; the proxy must keep one connection's produces to a partition in order", losses)
	}
}

// waitRetry waits until the proxy counted more retries of api for reason
// than before.
func (e *env) waitRetry(t *testing.T, api, reason string, before float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if e.retries(api, reason) > before {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the proxy did not retry %s after %s within 10s", api, reason)
}

// writer produces to every partition in turn until stopped.
type writer struct {
	a      acker
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	counts map[int32]int
	more   chan struct{}
}

func startWriter(ctx context.Context, cl *kgo.Client, topic string, parts int32, prefix string) *writer {
	w := &writer{cl: cl, done: make(chan struct{}), counts: map[int32]int{}, more: make(chan struct{}, 1)}
	runCtx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	go func() {
		defer close(w.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := range 5000 { // bounded: 10s at the tick rate
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
			}
			p := int32(i) % parts
			r := &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "key-%d", p), Value: fmt.Appendf(nil, "%s-%d", prefix, i)}
			// ctx, not runCtx: stopping the writer must not fail records
			// already handed to the client.
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				w.a.promise(r, err)
				if err == nil {
					w.mu.Lock()
					w.counts[r.Partition]++
					w.mu.Unlock()
					select {
					case w.more <- struct{}{}:
					default:
					}
				}
			})
		}
	}()
	return w
}

// waitAcks waits for n more acknowledgements on partition p.
func (w *writer) waitAcks(t *testing.T, p int32, n int) {
	t.Helper()
	w.mu.Lock()
	want := w.counts[p] + n
	w.mu.Unlock()
	timeout := time.After(10 * time.Second)
	for {
		w.mu.Lock()
		got := w.counts[p]
		w.mu.Unlock()
		if got >= want {
			return
		}
		select {
		case <-w.more:
		case <-timeout:
			_, errs := w.a.result()
			t.Fatalf("partition %d: %d of %d acknowledgements within 10s (errors: %v)", p, got, want, errs)
		}
	}
}

// stop ends producing, waits for every outstanding acknowledgement and
// fails the test on any produce error.
func (w *writer) stop(t *testing.T) []rec {
	t.Helper()
	w.cancel()
	<-w.done
	fctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := w.cl.Flush(fctx); err != nil {
		t.Errorf("flush: %v", err)
	}
	acks, errs := w.a.result()
	for _, err := range errs {
		t.Errorf("the producer saw an error: %v", err)
	}
	return acks
}

// reader consumes in the background until stopped.
type reader struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	got    map[int32][]rec
	n      int
	errs   []error
	more   chan struct{}
}

func startReader(ctx context.Context, cl *kgo.Client) *reader {
	r := &reader{cl: cl, done: make(chan struct{}), got: map[int32][]rec{}, more: make(chan struct{}, 1)}
	runCtx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	go func() {
		defer close(r.done)
		for runCtx.Err() == nil {
			fs := cl.PollFetches(runCtx)
			r.mu.Lock()
			fs.EachError(func(topic string, p int32, err error) {
				if runCtx.Err() == nil {
					r.errs = append(r.errs, fmt.Errorf("fetch %s/%d: %w", topic, p, err))
				}
			})
			fs.EachRecord(func(x *kgo.Record) {
				r.got[x.Partition] = append(r.got[x.Partition], rec{x.Partition, x.Offset, string(x.Key), string(x.Value)})
				r.n++
			})
			r.mu.Unlock()
			select {
			case r.more <- struct{}{}:
			default:
			}
		}
	}()
	return r
}

func (r *reader) waitAndStop(t *testing.T, want int) map[int32][]rec {
	t.Helper()
	defer func() {
		r.cancel()
		<-r.done
	}()
	timeout := time.After(15 * time.Second)
	for {
		r.mu.Lock()
		n := r.n
		r.mu.Unlock()
		if n >= want {
			break
		}
		select {
		case <-r.more:
		case <-timeout:
			t.Fatalf("the background consumer read %d of %d records within 15s", n, want)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, err := range r.errs {
		t.Errorf("background consumer: %v", err)
	}
	return r.got
}
