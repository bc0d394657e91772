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
	go func() { feedDone <- feed(prodCtx, in, recs) }()

	all := valueSet(recs)
	var notes []string
	killed := int32(-1)
	if err := col.waitUntil(ctx, 60*time.Second, "consumer to see a quarter of the records before the kill", func(per [][]Rec) bool {
		return countValues(per, all) >= failoverRecords/4
	}); err != nil {
		notes = append(notes, fmt.Sprintf("no kill: %v", err))
	} else if killed, err = h.tg.killOwner(ctx, topic, 0); err != nil {
		return "", fmt.Errorf("kill owner of %s/0: %w", topic, err)
	}
	t.Logf("killed broker %d (owner of %s/0)", killed, topic)

	start := time.Now()
	feedErr := <-feedDone
	res := <-prodDone
	t.Logf("producer finished %s after the kill: %d acked, err %v", time.Since(start).Round(time.Millisecond), len(res.acked), res.err)

	ackedSet := valueSet(res.acked)
	waitErr := col.waitUntil(ctx, 60*time.Second, fmt.Sprintf("consumer to see %d acknowledged records", len(res.acked)), func(per [][]Rec) bool {
		return countValues(per, ackedSet) >= len(res.acked)
	})
	stopErr := s.stop(ctx)
	got := dedupe(col.all())
	// Unacknowledged records may legitimately be stored too (their ack was
	// lost), so the check is against what was sent, allowing extras.
	note, verr := verify(res.acked, filterValues(got, ackedSet), verifyOpts{allowStoredDuplicates: true})
	if note != "" {
		notes = append(notes, note)
	}
	if err := verifyOrder(got); err != nil {
		notes = append(notes, "order within a partition changed across the failover: "+err.Error())
	}
	var problems []string
	if killed < 0 {
		problems = append(problems, "no broker was killed")
	}
	if feedErr != nil {
		problems = append(problems, fmt.Sprintf("feeding the producer: %v", feedErr))
	}
	if res.err != nil {
		problems = append(problems, fmt.Sprintf("producer error reached the application: %v", res.err))
	}
	if len(res.acked) != len(recs) {
		problems = append(problems, fmt.Sprintf("%d of %d records acknowledged", len(res.acked), len(recs)))
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
