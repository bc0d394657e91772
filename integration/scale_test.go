package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/assembly/devcluster/devtest"
	"github.com/kproxy/kproxy/bench/scale"
)

// coldStart is issue 11's storm and what both forms of the test assert of
// it: a topic of parts partitions, then one record for every partition at
// once (bench/scale.ProduceEach, as `make scale` does), so that every
// partition is acquired together, the storm that expired every broker's
// lease session and left a producer hanging.
type coldStart struct {
	seeds    []string // the proxies; the first creates the topic and reads back
	topic    string
	parts    int32
	delivery time.Duration // the producer's delivery timeout
	// sessionLosses reads every broker's lease session losses; an error
	// when one cannot be known.
	sessionLosses func(context.Context) (map[int32]float64, error)
	// topicReady waits until every proxy routes the created topic.
	topicReady func(context.Context) error
}

// readBackTimeout bounds the read of every acknowledged record.
const readBackTimeout = 45 * time.Second

// run creates the topic through the first proxy, as a user would, and
// fails the test unless every record is acknowledged (none failed, none
// left unanswered past the delivery timeout: a hang), no broker lost its
// lease session, and every acknowledged record reads back at its partition
// and offset with its value.
func (c coldStart) run(ctx context.Context, t *testing.T) {
	t.Helper()
	start := time.Now()
	adm := kadm.NewClient(newClient(t, c.seeds[0]))
	if _, err := adm.CreateTopic(ctx, c.parts, -1, nil, c.topic); err != nil {
		t.Fatalf("create %s with %d partitions: %v", c.topic, c.parts, err)
	}
	if err := c.topicReady(ctx); err != nil {
		t.Fatalf("topic %s not routed: %v", c.topic, err)
	}
	created := time.Since(start)
	storm, err := scale.ProduceEach(ctx, c.seeds, c.topic, scale.AllParts(c.parts), c.delivery)
	if err != nil {
		t.Fatalf("cold start: %v", err)
	}
	t.Logf("%d partitions: topic created and routed in %v; %d records acknowledged, %d failed, %d unanswered in %v (slowest answer %v)",
		c.parts, created, len(storm.Acked), storm.Failed, storm.Unanswered, storm.Took, storm.Slowest)
	c.checkSessions(ctx, t)
	if storm.Unanswered > 0 { // Err says "the producer hangs" with the counts
		t.Fatal(storm.Err())
	}
	if storm.Failed > 0 {
		t.Error(storm.Err())
	}
	if len(storm.Acked) == 0 {
		t.Fatal("nothing acknowledged")
	}
	produced := make([]record, len(storm.Acked))
	for i, a := range storm.Acked {
		if want := fmt.Sprintf("scale-%d", a.Partition); a.Value != want {
			t.Errorf("acknowledged %q for partition %d, which was sent %q", a.Value, a.Partition, want)
		}
		produced[i] = record{a.Partition, a.Offset, a.Value}
	}
	readStart := time.Now()
	checkSame(t, produced, consumeAll(t, c.seeds[0], c.topic, len(produced), readBackTimeout))
	t.Logf("read back %d records in %v; %v in all", len(produced), time.Since(readStart), time.Since(start))
}

func (c coldStart) checkSessions(ctx context.Context, t *testing.T) {
	t.Helper()
	losses, err := c.sessionLosses(ctx)
	if err != nil {
		t.Errorf("session losses: %v", err)
	}
	for id, n := range losses {
		if n != 0 {
			t.Errorf("broker %d lost its lease session %.0f times", id, n)
		}
	}
}

// TestScaleColdStart is the storm in process (devcluster: proxy, brokers and
// etcd in the test binary), so that under -race the race detector sees the
// storm's code paths. 2,000 partitions: the race detector makes the cluster
// many times slower on this 2-core machine, and 30,000 partitions do not
// fit there (measured under -race: 2,000 in 2.3-13 s; 30,000 left 6,485
// records failed and 5,069 unanswered after 120 s). TestScaleColdStartProcesses
// runs 30,000 through product processes.
func TestScaleColdStart(t *testing.T) {
	if testing.Short() {
		t.Skip("acquires thousands of partitions")
	}
	c := devtest.Start(t, devcluster.Config{Brokers: 3, StoreMemory: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	coldStart{seeds: c.ProxyAddrs(), topic: "scale", parts: 2000, delivery: 90 * time.Second,
		topicReady: func(context.Context) error { return nil }, // one proxy: CreateTopics answered through it
		sessionLosses: func(context.Context) (map[int32]float64, error) {
			out := map[int32]float64{}
			for id, st := range c.LeaseStats() {
				t.Logf("broker %d lease: %+v", id, st)
				out[id] = float64(st.SessionLosses)
			}
			return out, nil
		}}.run(ctx, t)
}
