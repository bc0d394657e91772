package kfake

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAdminMatchesKfake asks the same admin questions through the proxy
// and of kfake directly and compares the data (node ids and addresses
// differ by design: the proxy is the only broker clients see).
func TestAdminMatchesKfake(t *testing.T) {
	topics := []topicSpec{{"adm-a", 4}, {"adm-b", 2}}
	e := newEnv(t, topics...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	prod := e.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))

	// Two epochs of data on adm-a/0 and adm-a/1, one on the rest, with
	// timestamps one second apart so that by-time lookups have answers.
	for _, ts := range topics {
		produceTimed(ctx, t, prod, ts, 0, 20, t0)
	}
	for p := range int32(2) {
		if err := e.fake.MoveTopicPartition("adm-a", p, (e.fake.LeaderFor("adm-a", p)+1)%numBrokers); err != nil {
			t.Fatalf("kfake move adm-a/%d: %v", p, err)
		}
		e.waitRoutes(e.republish(ctx, "adm-a", p))
	}
	for _, ts := range topics {
		produceTimed(ctx, t, prod, ts, 20, 10, t0)
	}

	// One live group with a member (the client lives until the test ends),
	// one group that only commits.
	e.waitRoutes(max(e.publishCoordinator(ctx, "adm-live"), e.publishCoordinator(ctx, "adm-commits")))
	e.client(kgo.ConsumerGroup("adm-live"), kgo.ConsumeTopics("adm-b"), kgo.ClientID("adm-live-member"),
		kgo.HeartbeatInterval(250*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	waitStableGroup(ctx, t, e, "adm-live", 1, 2)
	via, direct := kadm.NewClient(e.client()), kadm.NewClient(e.direct)
	commits := kadm.Offsets{}
	commits.Add(kadm.Offset{Topic: "adm-a", Partition: 1, At: 7, LeaderEpoch: 1, Metadata: "m1"})
	commits.Add(kadm.Offset{Topic: "adm-b", Partition: 0, At: 12, LeaderEpoch: -1})
	if _, err := via.CommitOffsets(ctx, "adm-commits", commits); err != nil {
		t.Fatalf("commit offsets through the proxy: %v", err)
	}

	t.Run("ListTopics", func(t *testing.T) {
		a, errA := via.ListTopics(ctx)
		b, errB := direct.ListTopics(ctx)
		same(t, "ListTopics error", errString(errA), errString(errB))
		same(t, "topic names", a.Names(), b.Names())
		want(t, "kfake topics", len(b.Names()), len(topics))
		for _, name := range b.Names() {
			same(t, "topic "+name, describeTopic(a[name]), describeTopic(b[name]))
		}
	})

	t.Run("ListOffsets", func(t *testing.T) {
		names := []string{"adm-a", "adm-b"}
		type lister struct {
			what string
			fn   func(*kadm.Client) (kadm.ListedOffsets, error)
		}
		listers := []lister{
			{"start", func(c *kadm.Client) (kadm.ListedOffsets, error) { return c.ListStartOffsets(ctx, names...) }},
			{"end", func(c *kadm.Client) (kadm.ListedOffsets, error) { return c.ListEndOffsets(ctx, names...) }},
		}
		for _, ms := range []int64{t0.UnixMilli() - 1, t0.UnixMilli() + 5500, t0.UnixMilli() + 25_000, t0.UnixMilli() + 3_600_000} {
			listers = append(listers, lister{fmt.Sprintf("after %d ms", ms-t0.UnixMilli()),
				func(c *kadm.Client) (kadm.ListedOffsets, error) { return c.ListOffsetsAfterMilli(ctx, ms, names...) }})
		}
		for _, l := range listers {
			a, errA := l.fn(via)
			b, errB := l.fn(direct)
			same(t, l.what+" error", errString(errA), errString(errB))
			same(t, l.what, describeListed(a), describeListed(b))
			want(t, "kfake "+l.what+" offsets", len(describeListed(b)), 6)
		}
	})

	t.Run("OffsetForLeaderEpoch", func(t *testing.T) {
		e := e.in(t)
		// A current leader epoch newer than the leader's is
		// TestNewerLeaderEpochPassesThrough's subject.
		epochs := map[string]map[int32]partState{}
		for _, ts := range topics {
			epochs[ts.name] = e.partitions(ctx, ts.name)
		}
		currents := map[string]func(string, int32) int32{
			"none":  func(string, int32) int32 { return -1 },
			"stale": func(string, int32) int32 { return 1 }, // fenced where moved
			"exact": func(topic string, p int32) int32 { return epochs[topic][p].epoch },
		}
		cl := e.client()
		for _, name := range slices.Sorted(maps.Keys(currents)) {
			for _, asked := range []int32{0, 1, 2, 3} {
				req := epochRequest(topics, currents[name], asked)
				a, errA := req.RequestWith(ctx, cl)
				b, errB := req.RequestWith(ctx, e.direct)
				what := fmt.Sprintf("OffsetForLeaderEpoch(epoch %d, current leader epoch %s)", asked, name)
				same(t, what+" error", errString(errA), errString(errB))
				if errA == nil && errB == nil {
					same(t, what, describeEpochs(a), describeEpochs(b))
					want(t, "kfake "+what+" partitions", len(describeEpochs(b)), 6)
				}
			}
		}
	})

	t.Run("Groups", func(t *testing.T) {
		la, errA := via.ListGroups(ctx)
		lb, errB := direct.ListGroups(ctx)
		same(t, "ListGroups error", errString(errA), errString(errB))
		same(t, "ListGroups", describeListedGroups(la), describeListedGroups(lb))
		want(t, "kfake groups", len(lb), 2)

		// A group without a coordinator key is TestUnclaimedGroup's subject.
		groups := []string{"adm-live", "adm-commits"}
		da, errA := via.DescribeGroups(ctx, groups...)
		db, errB := direct.DescribeGroups(ctx, groups...)
		same(t, "DescribeGroups error", errString(errA), errString(errB))
		for _, g := range groups {
			same(t, "DescribeGroups "+g, describeGroup(da[g]), describeGroup(db[g]))
		}
		want(t, "kfake adm-live members", len(db["adm-live"].Members), 1)
		for _, g := range groups {
			fa, errA := via.FetchOffsets(ctx, g)
			fb, errB := direct.FetchOffsets(ctx, g)
			same(t, "FetchOffsets "+g+" error", errString(errA), errString(errB))
			same(t, "FetchOffsets "+g, describeFetched(fa), describeFetched(fb))
		}
		fb, _ := direct.FetchOffsets(ctx, "adm-commits")
		want(t, "kfake adm-commits offsets", len(describeFetched(fb)), 2)
	})

	t.Run("DescribeConfigs", func(t *testing.T) {
		a, errA := via.DescribeTopicConfigs(ctx, "adm-a", "adm-missing")
		b, errB := direct.DescribeTopicConfigs(ctx, "adm-a", "adm-missing")
		same(t, "DescribeTopicConfigs error", errString(errA), errString(errB))
		same(t, "DescribeTopicConfigs", describeConfigs(a), describeConfigs(b))
	})
}

// produceTimed writes n records to every partition of ts, record i stamped
// t0 + i seconds.
func produceTimed(ctx context.Context, t *testing.T, cl *kgo.Client, ts topicSpec, from, n int, t0 time.Time) {
	t.Helper()
	var rs []*kgo.Record
	for p := range ts.partitions {
		for i := from; i < from+n; i++ {
			rs = append(rs, &kgo.Record{Topic: ts.name, Partition: p, Timestamp: t0.Add(time.Duration(i) * time.Second),
				Value: fmt.Appendf(nil, "%s-%d-%d", ts.name, p, i)})
		}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", ts.name, err)
	}
}

func epochRequest(topics []topicSpec, current func(string, int32) int32, asked int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	for _, ts := range topics {
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = ts.name
		for p := range ts.partitions {
			rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = p, current(ts.name, p), asked
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// same fails with a readable diff when got (via the proxy) and want (kfake
// direct) differ.
func same[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	g, w := fmt.Sprintf("%+v", got), fmt.Sprintf("%+v", want)
	if g != w {
		t.Errorf("%s differs through the proxy:\n via proxy:   %s\n kfake direct: %s", what, g, w)
	}
}

// want guards a comparison against comparing nothing: the reference answer
// must hold what the test set up.
func want(t *testing.T, what string, got, n int) {
	t.Helper()
	if got != n {
		t.Errorf("%s: %d, want %d (the comparison would prove little)", what, got, n)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func describeTopic(d kadm.TopicDetail) string {
	var b strings.Builder
	fmt.Fprintf(&b, "id=%s internal=%v err=%v partitions=%d", d.ID, d.IsInternal, d.Err, len(d.Partitions))
	for _, p := range slices.Sorted(maps.Keys(d.Partitions)) {
		pd := d.Partitions[p]
		fmt.Fprintf(&b, " [%d epoch=%d err=%v]", p, pd.LeaderEpoch, pd.Err)
	}
	return b.String()
}

func describeListed(l kadm.ListedOffsets) []string {
	var out []string
	l.Each(func(o kadm.ListedOffset) {
		out = append(out, fmt.Sprintf("%s/%d offset=%d ts=%d epoch=%d err=%v", o.Topic, o.Partition, o.Offset, o.Timestamp, o.LeaderEpoch, o.Err))
	})
	slices.Sort(out)
	return out
}

func describeEpochs(r *kmsg.OffsetForLeaderEpochResponse) []string {
	var out []string
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("%s/%d err=%d epoch=%d end=%d", t.Topic, p.Partition, p.ErrorCode, p.LeaderEpoch, p.EndOffset))
		}
	}
	slices.Sort(out)
	return out
}

func describeListedGroups(l kadm.ListedGroups) []string {
	var out []string
	for _, g := range l {
		out = append(out, fmt.Sprintf("%s type=%q protocol=%q state=%q", g.Group, g.GroupType, g.ProtocolType, g.State))
	}
	slices.Sort(out)
	return out
}

func describeGroup(g kadm.DescribedGroup) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state=%q protocolType=%q protocol=%q err=%v members=%d", g.State, g.ProtocolType, g.Protocol, g.Err, len(g.Members))
	for _, m := range g.Members {
		fmt.Fprintf(&b, " [%s client=%s host=%s", m.MemberID, m.ClientID, m.ClientHost)
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range c.Topics {
				fmt.Fprintf(&b, " %s%v", tp.Topic, tp.Partitions)
			}
		}
		b.WriteString("]")
	}
	return b.String()
}

func describeFetched(r kadm.OffsetResponses) []string {
	var out []string
	r.Each(func(o kadm.OffsetResponse) {
		out = append(out, fmt.Sprintf("%s/%d at=%d epoch=%d meta=%q err=%v", o.Topic, o.Partition, o.At, o.LeaderEpoch, o.Metadata, o.Err))
	})
	slices.Sort(out)
	return out
}

func describeConfigs(rs kadm.ResourceConfigs) []string {
	var out []string
	for _, r := range rs {
		var cs []string
		for _, c := range r.Configs {
			cs = append(cs, fmt.Sprintf("%s=%s(%s)", c.Key, c.MaybeValue(), c.Source))
		}
		slices.Sort(cs) // kfake lists configs in map order
		out = append(out, fmt.Sprintf("%s err=%v %v", r.Name, r.Err, cs))
	}
	slices.Sort(out)
	return out
}
