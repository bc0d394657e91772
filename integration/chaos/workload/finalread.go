package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/integration/chaos/history"
)

// FinalRead reads every partition of topic from its log start to its high
// watermark through each proxy, the proxies in parallel, and logs one
// final-read operation per proxy and partition: ok with every record, the log
// start (Offset) and the high watermark when the read reached it; info with
// the reason otherwise. It returns an error only if some read was incomplete.
func FinalRead(ctx context.Context, rec *history.Recorder, proxies []string, topic string, partitions int32, timeout time.Duration) error {
	errs := make([]error, len(proxies))
	var wg sync.WaitGroup
	for i, via := range proxies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			errs[i] = finalReadVia(rctx, rec, via, topic, partitions)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stallTimeout ends a final read that stopped making progress: a log with a
// hole below its high watermark (a bug) would otherwise hold the read until
// its deadline.
const stallTimeout = 10 * time.Second

type span struct {
	start, hwm int64
	err        error
}

func finalReadVia(ctx context.Context, rec *history.Recorder, via, topic string, partitions int32) error {
	invs := make([]history.Op, partitions)
	for p := range partitions {
		invs[p] = rec.Invoke(history.Op{Process: "final-" + via, F: history.FinalRead, Partition: p, Via: via})
	}
	spans := listSpans(ctx, via, topic, partitions)
	records, readErr := readSpans(ctx, via, topic, spans)
	var errs []error
	for p := range partitions {
		out := history.Op{Type: history.OK, Offset: spans[p].start, Records: records[p],
			Watermarks: []history.Watermark{{Partition: p, HWM: spans[p].hwm}}}
		got := int64(len(records[p]))
		switch {
		case spans[p].err != nil:
			out = history.Op{Type: history.Info, Error: spans[p].err.Error(), Records: records[p]}
		case got < spans[p].hwm-spans[p].start:
			out.Type = history.Info
			out.Error = fmt.Sprintf("read %d of %d records in [%d, %d): %v", got, spans[p].hwm-spans[p].start, spans[p].start, spans[p].hwm, readErr)
		}
		if out.Type != history.OK {
			errs = append(errs, fmt.Errorf("final read of %s/%d via %s: %s", topic, p, via, out.Error))
		}
		rec.Complete(invs[p], out)
	}
	return errors.Join(errs...)
}

// listSpans asks for each partition's log start and high watermark,
// retrying until every partition answered or ctx ends.
func listSpans(ctx context.Context, via, topic string, partitions int32) []span {
	spans := make([]span, partitions)
	for p := range spans {
		spans[p] = span{start: -1, hwm: -1, err: errors.New("no answer")}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(via), kgo.DialTimeout(2*time.Second), kgo.RequestRetries(2))
	if err != nil {
		for p := range spans {
			spans[p].err = err
		}
		return spans
	}
	defer cl.Close()
	for {
		missing := 0
		for _, ts := range []int64{-2, -1} { // earliest, latest
			offs, errs := listOffsets(ctx, cl, topic, partitions, ts)
			for p := range partitions {
				switch {
				case errs[p] != nil:
					spans[p].err = errs[p]
				case ts == -2:
					spans[p].start = offs[p]
				default:
					spans[p].hwm = offs[p]
				}
			}
		}
		for p := range spans {
			if spans[p].start >= 0 && spans[p].hwm >= 0 {
				spans[p].err = nil
			} else {
				missing++
			}
		}
		if missing == 0 {
			return spans
		}
		select {
		case <-ctx.Done():
			return spans
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func listOffsets(ctx context.Context, cl *kgo.Client, topic string, partitions int32, ts int64) ([]int64, []error) {
	offs := make([]int64, partitions)
	errs := make([]error, partitions)
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = ts
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		errs[p] = errors.New("partition missing from ListOffsets answer")
	}
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		for p := range errs {
			errs[p] = fmt.Errorf("list offsets: %w", err)
		}
		return offs, errs
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if rp.Partition < 0 || rp.Partition >= partitions {
				continue
			}
			errs[rp.Partition] = kerr.ErrorForCode(rp.ErrorCode)
			offs[rp.Partition] = rp.Offset
		}
	}
	return offs, errs
}

// readSpans consumes each partition from its start to just below its high
// watermark and returns the records by partition.
func readSpans(ctx context.Context, via, topic string, spans []span) ([][]history.Record, error) {
	records := make([][]history.Record, len(spans))
	parts := map[int32]kgo.Offset{}
	left := 0
	for p, s := range spans {
		if s.err == nil && s.hwm > s.start {
			parts[int32(p)] = kgo.NewOffset().At(s.start)
			left++
		}
	}
	if left == 0 {
		return records, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(via), kgo.DialTimeout(2*time.Second),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return records, err
	}
	defer cl.Close()
	done := make([]bool, len(spans))
	var lastErr error
	progress := time.Now()
	for left > 0 && ctx.Err() == nil {
		if time.Since(progress) > stallTimeout {
			return records, fmt.Errorf("no new record for %s (last error: %v)", stallTimeout, lastErr)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			if fp.Err != nil && errors.Is(fp.Err, context.DeadlineExceeded) && ctx.Err() == nil {
				return // the one-second poll ended
			}
			if fp.Err != nil {
				lastErr = fmt.Errorf("partition %d: %w", fp.Partition, fp.Err)
				return
			}
			if fp.Partition < 0 || int(fp.Partition) >= len(spans) {
				return
			}
			s := spans[fp.Partition]
			if len(fp.Records) > 0 {
				progress = time.Now()
			}
			for _, r := range fp.Records {
				if r.Offset < s.hwm {
					records[fp.Partition] = append(records[fp.Partition], history.Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
				}
				if r.Offset == s.hwm-1 && !done[fp.Partition] {
					done[fp.Partition] = true
					left--
				}
			}
		})
	}
	if lastErr == nil {
		lastErr = ctx.Err()
	}
	return records, lastErr
}
