package workload

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kproxy/kproxy/integration/chaos/checker"
	"github.com/kproxy/kproxy/integration/chaos/history"
)

// TestAgainstKfake runs the workload against franz-go's in-memory Kafka
// (two seed addresses standing in for two proxies) and checks the history:
// a correct Kafka must give a clean report with every send acknowledged and
// everything read back.
func TestAgainstKfake(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(4, "kchaos"))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	addrs := fake.ListenAddrs()
	rec := history.NewRecorder(nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := EnsureTopic(ctx, addrs[0], "kchaos", 4); err != nil {
		t.Fatal(err)
	}
	w, err := Start(Config{Proxies: addrs, Partitions: 4, Producers: 4, Rate: 100, Recorder: rec, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // let it send: the run length is the test's input
	w.Drain(ctx)
	if err := FinalRead(ctx, rec, addrs, "kchaos", 4, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	res := checker.Check(rec.Ops(), checker.Options{})
	t.Logf("%s polled=%d", res, res.Stats.PolledRecords)
	if !res.Valid {
		for _, an := range res.Anomalies {
			t.Errorf("%s: %s", an.Kind, an.Detail)
		}
	}
	if res.Stats.SendsOK < 100 || res.Stats.SendsOK != res.Stats.Sends {
		t.Fatalf("sends %d, ok %d: a healthy cluster acknowledges every send", res.Stats.Sends, res.Stats.SendsOK)
	}
	if res.Stats.SendsIdempotent == 0 || res.Stats.SendsIdempotent == res.Stats.Sends {
		t.Fatalf("mixed mode sent %d of %d idempotently; want both modes", res.Stats.SendsIdempotent, res.Stats.Sends)
	}
	if res.Stats.PolledRecords == 0 {
		t.Fatal("consumers saw nothing")
	}
	if res.Stats.FinalReads != 8 {
		t.Fatalf("final reads %d, want 2 proxies x 4 partitions", res.Stats.FinalReads)
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		idem bool
		want history.Type
	}{
		{nil, false, history.OK},
		{nil, true, history.OK},
		{kerr.NotLeaderForPartition, false, history.Fail},
		{kerr.NotLeaderForPartition, true, history.Info},
		{kerr.RequestTimedOut, false, history.Info},
		{kerr.NotEnoughReplicasAfterAppend, false, history.Info},
		{context.DeadlineExceeded, false, history.Info},
	}
	for _, tc := range cases {
		if got := classify(tc.err, tc.idem); got != tc.want {
			t.Errorf("classify(%v, idempotent=%t) = %s, want %s", tc.err, tc.idem, got, tc.want)
		}
	}
}
