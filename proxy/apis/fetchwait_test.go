package apis

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchWaitShaping: to brokers that wait per partition, a Fetch
// sub-request goes with MaxWait 0 when a partition is known (from a
// watermark the proxy passed on) to have records at its fetch offset and
// the client wants any byte, and otherwise with what is left of MaxWait
// divided among its partitions; other brokers get the client's MaxWait.
func TestFetchWaitShaping(t *testing.T) {
	fetch := func(offset int64, minBytes int32) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 12, 4000, minBytes, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "u" // four partitions, all on broker 2
		for p := range int32(4) {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		return req
	}
	// The fake broker answers watermark 2000+p (value), with records.
	cases := []struct {
		name        string
		perPart     bool
		warm        bool // an earlier fetch passed the watermarks on
		offset      int64
		minBytes    int32
		wantMaxWait int32
	}{
		{"in-order broker: the client's", false, true, 0, 1, 4000},
		{"nothing known: divided", true, false, 0, 1, 1000},
		{"records below the watermark: no wait", true, true, 0, 1, 0},
		{"at the watermark: divided", true, true, 2003, 1, 1000},
		{"MinBytes above one byte: divided", true, true, 0, 100, 1000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, f, _ := newTestDispatcher(t, func(cfg *Config) { cfg.PerPartitionFetchWait = c.perPart })
			defer d.Close()
			if c.warm {
				roundTrip(t, d, fetch(0, 1))
			}
			roundTrip(t, d, fetch(c.offset, c.minBytes))
			reqs := f.requests(kmsg.Fetch)
			got := reqs[len(reqs)-1].req.(*kmsg.FetchRequest).MaxWaitMillis
			if got != c.wantMaxWait {
				t.Fatalf("sub-request MaxWait = %d, want %d", got, c.wantMaxWait)
			}
		})
	}
}
