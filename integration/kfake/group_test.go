package kfake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupsCommitAndResume: consumer groups coordinated by kfake through
// the proxy share partitions, commit, and after a restart resume exactly
// at their commits (no record read twice, none skipped).
func TestGroupsCommitAndResume(t *testing.T) {
	const topic, parts = "events", 6
	e := newEnv(t, topicSpec{topic, parts})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	prod := e.client()

	t.Run("kgo-two-members", func(t *testing.T) {
		e := e.in(t)
		const group = "g-kgo"
		e.waitRoutes(e.publishCoordinator(ctx, group))
		for round, n := range []int{300, 150} {
			committed := committedOffsets(ctx, t, e.client(), group, topic)
			g := startKgoMembers(ctx, t, e, group, topic, 2)
			waitStableGroup(ctx, t, e, group, 2, parts)
			acks := produceKeyed(ctx, t, prod, topic, fmt.Sprintf("kgo-round%d", round), n, 30)
			got := g.waitAndStop(ctx, t, len(acks))
			checkResumed(t, fmt.Sprintf("round %d", round), committed, acks, got)
			for m, c := range g.perMember() {
				if c == 0 {
					t.Errorf("round %d: member %d consumed nothing: the group did not share partitions", round, m)
				}
			}
			checkCommitsMatch(ctx, t, e, group, topic)
		}
	})

	t.Run("sarama", func(t *testing.T) {
		e := e.in(t)
		const group = "g-sarama"
		e.waitRoutes(e.publishCoordinator(ctx, group))
		for round, n := range []int{100, 50} {
			committed := committedOffsets(ctx, t, e.client(), group, topic)
			acks := produceKeyed(ctx, t, prod, topic, fmt.Sprintf("sarama-round%d", round), n, 10)
			want := n
			if round == 0 { // a new group starts at the oldest offset: everything so far
				want = 0
				for _, off := range endOffsets(ctx, t, e.direct, topic) {
					want += int(off)
				}
			}
			got := saramaGroupConsume(ctx, t, e.srv.Addr(), group, topic, want)
			if round == 0 {
				total := 0
				for _, rs := range got {
					total += len(rs)
				}
				if total != want {
					t.Errorf("sarama group read %d records, topic holds %d", total, want)
				}
				continue
			}
			checkResumed(t, fmt.Sprintf("sarama round %d", round), committed, acks, got)
		}
		checkCommitsMatch(ctx, t, e, group, topic)
	})
}

// checkResumed fails unless got is exactly acks (each record once) and
// nothing below the offsets committed before was read again.
func checkResumed(t *testing.T, what string, committed map[int32]int64, acks []rec, got map[int32][]rec) {
	t.Helper()
	for p, rs := range got {
		for _, r := range rs {
			if r.offset < committed[p] {
				t.Errorf("%s: read %s again, below the committed offset %d", what, r, committed[p])
			}
		}
	}
	checkAcked(t, what, acks, got)
}

// checkCommitsMatch fails unless the group's commits, read through the
// proxy and from kfake directly, agree and equal the end offsets.
func checkCommitsMatch(ctx context.Context, t *testing.T, e *env, group, topic string) {
	t.Helper()
	viaProxy := committedOffsets(ctx, t, e.client(), group, topic)
	direct := committedOffsets(ctx, t, e.direct, group, topic)
	ends := endOffsets(ctx, t, e.direct, topic)
	if !maps.Equal(viaProxy, direct) {
		t.Errorf("group %s commits: via proxy %v, kfake direct %v", group, viaProxy, direct)
	}
	for p, end := range ends {
		if viaProxy[p] != end {
			t.Errorf("group %s: committed %d on %s/%d, end offset %d", group, viaProxy[p], topic, p, end)
		}
	}
}

func committedOffsets(ctx context.Context, t *testing.T, cl *kgo.Client, group, topic string) map[int32]int64 {
	t.Helper()
	resp, err := kadm.NewClient(cl).FetchOffsetsForTopics(ctx, group, topic)
	if errors.Is(err, kerr.GroupIDNotFound) { // a group that never committed
		return map[int32]int64{}
	}
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Errorf("committed offset of %s on %s/%d: %v", group, o.Topic, o.Partition, o.Err)
		}
		if o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out
}

// waitStableGroup waits until the group, described through the proxy, is
// stable with members members that together hold all parts partitions.
func waitStableGroup(ctx context.Context, t *testing.T, e *env, group string, members, parts int) {
	t.Helper()
	adm := kadm.NewClient(e.client())
	deadline := time.Now().Add(15 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		gs, err := adm.DescribeGroups(ctx, group)
		if err == nil {
			g := gs[group]
			assigned, empty := 0, false
			for _, m := range g.Members {
				c, ok := m.Assigned.AsConsumer()
				n := 0
				if ok {
					for _, tp := range c.Topics {
						n += len(tp.Partitions)
					}
				}
				assigned += n
				empty = empty || n == 0
			}
			if g.Err == nil && g.State == "Stable" && len(g.Members) == members && assigned == parts && !empty {
				return
			}
			last = fmt.Sprintf("state %s, %d members, %d partitions assigned, err %v", g.State, len(g.Members), assigned, g.Err)
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("group %s not stable with %d members sharing %d partitions within 15s (last: %s)", group, members, parts, last)
}

// kgoMembers runs group members that poll, commit what they polled
// synchronously, and only then allow a rebalance.
type kgoMembers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	got    map[int32][]rec
	by     map[int]int
	total  int
	errs   []error
	more   chan struct{} // signalled after each poll with records
}

func startKgoMembers(ctx context.Context, t *testing.T, e *env, group, topic string, n int) *kgoMembers {
	t.Helper()
	g := &kgoMembers{got: map[int32][]rec{}, by: map[int]int{}, more: make(chan struct{}, 1)}
	runCtx, cancel := context.WithCancel(ctx)
	g.cancel = cancel
	for m := range n {
		cl := e.client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.BlockRebalanceOnPoll(), kgo.HeartbeatInterval(250*time.Millisecond),
			kgo.FetchMaxWait(500*time.Millisecond), kgo.ClientID(fmt.Sprintf("%s-member-%d", group, m)))
		g.wg.Go(func() { g.run(runCtx, cl, m) })
	}
	return g
}

func (g *kgoMembers) run(ctx context.Context, cl *kgo.Client, m int) {
	defer cl.Close() // leaves the group
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		var errs []error
		fs.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil {
				errs = append(errs, fmt.Errorf("member %d: fetch %s/%d: %w", m, topic, p, err))
			}
		})
		if len(recs) > 0 {
			if err := cl.CommitRecords(ctx, recs...); err != nil && ctx.Err() == nil {
				errs = append(errs, fmt.Errorf("member %d: commit %d records: %w", m, len(recs), err))
			}
		}
		cl.AllowRebalance()
		g.mu.Lock()
		for _, r := range recs {
			g.got[r.Partition] = append(g.got[r.Partition], rec{r.Partition, r.Offset, string(r.Key), string(r.Value)})
		}
		g.by[m] += len(recs)
		g.total += len(recs)
		g.errs = append(g.errs, errs...)
		g.mu.Unlock()
		if len(recs) > 0 {
			select {
			case g.more <- struct{}{}:
			default:
			}
		}
	}
}

// waitAndStop waits until want records were consumed and committed, then
// stops the members (they leave the group) and returns what they read.
func (g *kgoMembers) waitAndStop(ctx context.Context, t *testing.T, want int) map[int32][]rec {
	t.Helper()
	defer g.stop()
	wait, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		g.mu.Lock()
		total := g.total
		g.mu.Unlock()
		if total >= want {
			break
		}
		select {
		case <-g.more:
		case <-wait.Done():
			t.Fatalf("group consumed %d of %d records within 15s", total, want)
		}
	}
	g.stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, err := range g.errs {
		t.Errorf("%v", err)
	}
	return g.got
}

func (g *kgoMembers) stop() {
	g.cancel()
	g.wg.Wait()
}

func (g *kgoMembers) perMember() map[int]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.by)
}

// saramaGroupConsume runs one sarama group member until it has read and
// committed want records, then closes it (it leaves the group).
func saramaGroupConsume(ctx context.Context, t *testing.T, addr, group, topic string, want int) map[int32][]rec {
	t.Helper()
	cfg := saramaConfig()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Heartbeat.Interval = 250 * time.Millisecond
	cl := saramaClient(t, addr, cfg)
	cg, err := sarama.NewConsumerGroupFromClient(group, cl)
	if err != nil {
		t.Fatalf("sarama consumer group %s: %v", group, err)
	}
	h := &saramaHandler{out: make(chan rec)}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	wg.Go(func() {
		for runCtx.Err() == nil {
			if err := cg.Consume(runCtx, []string{topic}, h); err != nil && runCtx.Err() == nil {
				select {
				case errs <- err:
				default:
				}
				return
			}
		}
	})
	defer func() {
		cancel()
		wg.Wait()
		if err := cg.Close(); err != nil {
			t.Errorf("close sarama group %s: %v", group, err)
		}
	}()
	got := map[int32][]rec{}
	wait, stop := context.WithTimeout(ctx, 15*time.Second)
	defer stop()
	for n := 0; n < want; n++ {
		select {
		case r := <-h.out:
			got[r.partition] = append(got[r.partition], r)
		case err := <-errs:
			t.Fatalf("sarama group %s: %v", group, err)
		case <-wait.Done():
			t.Fatalf("sarama group %s read %d of %d records within 15s", group, n, want)
		}
	}
	return got
}

// saramaHandler hands messages out only after committing them; it commits
// whenever it has caught up with what the claim has buffered.
type saramaHandler struct{ out chan rec }

func (h *saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	var pending []rec
	for {
		select {
		case m, ok := <-c.Messages():
			if !ok {
				return nil
			}
			s.MarkMessage(m, "")
			pending = append(pending, rec{m.Partition, m.Offset, string(m.Key), string(m.Value)})
			if len(c.Messages()) > 0 {
				continue
			}
			s.Commit()
			for _, r := range pending {
				select {
				case h.out <- r:
				case <-s.Context().Done():
					return nil
				}
			}
			pending = pending[:0]
		case <-s.Context().Done():
			return nil
		}
	}
}
