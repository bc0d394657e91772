package compat

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

const (
	failoverRecords = 600
	failoverPace    = 10 * time.Millisecond // ~6 s of steady production
	// failoverDelivery bounds how long the producer may take to deliver
	// everything after the kill. It is above every client's default
	// delivery behaviour that matters here except librdkafka's 300 s
	// message.timeout.ms, which a healthy failover never comes near.
	failoverDelivery = 150 * time.Second
)

// failover: the client produces at a steady pace and consumes from the
// beginning; once the consumer has seen a quarter of the records the broker
// that owns partition 0 is killed (no graceful release). The producer must
// finish with no error reaching the application, and the consumer must see
// every acknowledged record.
func (h *harness) failover(t *testing.T) (string, error) {
	ctx, cancel := h.within(failoverDelivery + 90*time.Second)
	defer cancel()
	topic, err := h.topic(ctx, "failover")
	if err != nil {
		return "", err
	}
	s, err := h.startConsumer(ctx, t, topic, "")
	if err != nil {
		return "", err
	}
	col := collect(s)
	recs := makeRecords(topic, 0, failoverRecords)

	in := make(chan Rec)
	type produced struct {
		acked []Rec
		err   error
	}
	prodDone := make(chan produced, 1)
	prodCtx, prodCancel := context.WithTimeout(ctx, failoverDelivery)
	defer prodCancel()
	go func() {
		acked, err := h.d.produce(prodCtx, h.tg.bootstrap(), topic, in, produceOpts{})
		prodDone <- produced{acked, err}
	}()
	feedDone := make(chan error, 1)
	feedStart := time.Now()
	go func() { feedDone <- feed(prodCtx, in, recs) }()

	var notes []string
	killed, killStart, err := h.killWhenFlowing(ctx, t, col, topic, valueSet(recs), feedStart)
	if err != nil {
		notes = append(notes, err.Error())
	}

	feedErr := <-feedDone
	res := <-prodDone
	if !killStart.IsZero() {
		t.Logf("producer finished %s after the kill began (feeding ended %s after it): %d acked, err %v",
			time.Since(killStart).Round(time.Millisecond), feedStart.Add(failoverRecords*failoverPace).Sub(killStart).Round(time.Millisecond),
			len(res.acked), res.err)
	}

	ackedSet := valueSet(res.acked)
	waitErr := col.waitUntil(ctx, 60*time.Second, fmt.Sprintf("consumer to see %d acknowledged records", len(res.acked)), func(per [][]Rec) bool {
		return countValues(per, ackedSet) >= len(res.acked)
	})
	stopErr := s.stop(ctx)
	return failoverVerdict(t, notes, killed, len(recs), dedupe(col.all()), res.acked,
		feedErr, res.err, waitErr, stopErr)
}

// failoverVerdict judges a failover run: it fails on anything the
// application would have seen or lost, and notes what is merely allowed.
func failoverVerdict(t *testing.T, notes []string, killed int32, sent int, got, acked []Rec, feedErr, prodErr, waitErr, stopErr error) (string, error) {
	ackedSet := valueSet(acked)
	// Unacknowledged records may legitimately be stored too (their ack was
	// lost), so the check is against what was sent, allowing extras.
	// Notes stay free of counts so that the generated doc only changes
	// when a result does; the details are in the test log.
	note, verr := verify(acked, filterValues(got, ackedSet), verifyOpts{allowStoredDuplicates: true})
	if note != "" {
		t.Logf("failover: %s", note)
		notes = append(notes, "some records stored twice (non-idempotent producer retry)")
	}
	if err := verifyOrder(got); err != nil {
		t.Logf("failover: %v", err)
		notes = append(notes, "order within a partition changed across the failover (non-idempotent producer retry)")
	}
	var problems []string
	if killed < 0 {
		problems = append(problems, "no broker was killed")
	}
	if feedErr != nil {
		problems = append(problems, fmt.Sprintf("feeding the producer: %v", feedErr))
	}
	if prodErr != nil {
		problems = append(problems, fmt.Sprintf("producer error reached the application: %v", prodErr))
	}
	if len(acked) != sent {
		problems = append(problems, fmt.Sprintf("%d of %d records acknowledged", len(acked), sent))
	}
	if verr != nil {
		problems = append(problems, fmt.Sprintf("consumer: %v (wait: %v)", verr, waitErr))
	}
	if stopErr != nil {
		problems = append(problems, fmt.Sprintf("consumer: %v", stopErr))
	}
	if len(problems) > 0 {
		return strings.Join(notes, "; "), fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return strings.Join(notes, "; "), nil
}

// killWhenFlowing waits until the consumer has seen a quarter of the
// records, then kills the owner of partition 0; it returns -1 if it could
// not.
func (h *harness) killWhenFlowing(ctx context.Context, t *testing.T, col *collector, topic string, all map[string]bool, feedStart time.Time) (int32, time.Time, error) {
	if err := col.waitUntil(ctx, 60*time.Second, "consumer to see a quarter of the records before the kill", func(per [][]Rec) bool {
		return countValues(per, all) >= failoverRecords/4
	}); err != nil {
		return -1, time.Time{}, fmt.Errorf("no kill: %w", err)
	}
	killStart := time.Now()
	killed, err := h.tg.killOwner(ctx, topic, 0)
	if err != nil {
		return -1, time.Time{}, fmt.Errorf("no kill: owner of %s/0: %w", topic, err)
	}
	t.Logf("killed broker %d (owner of %s/0) %s after production started; the kill call took %s",
		killed, topic, killStart.Sub(feedStart).Round(time.Millisecond), time.Since(killStart).Round(time.Millisecond))
	return killed, killStart, nil
}

// feed hands recs to the producer at a steady pace, then closes in.
func feed(ctx context.Context, in chan<- Rec, recs []Rec) error {
	defer close(in)
	tick := time.NewTicker(failoverPace)
	defer tick.Stop()
	for _, r := range recs {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case in <- r:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func filterValues(recs []Rec, keep map[string]bool) []Rec {
	var out []Rec
	for _, r := range recs {
		if keep[r.Value] {
			out = append(out, r)
		}
	}
	return out
}
