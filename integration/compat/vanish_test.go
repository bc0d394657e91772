package compat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	vanishRecords = 5
	// vanishDelivery is the delivery timeout every client is given, in its
	// own terms (produceOpts.deliveryTimeout).
	vanishDelivery = 5 * time.Second
	// vanishSlack covers a produce already in flight when the delivery
	// timeout passes, a subprocess's start, and a loaded 2-core machine.
	vanishSlack = 10 * time.Second
	// vanishTries is how many records the same producer may fail after the
	// partition is free before the check tries a new producer instance.
	vanishTries = 3
)

// outcome is what the client reported for one record, and when.
type outcome struct {
	rec   Rec
	err   error
	after time.Duration // since the record was handed to the client
}

// vanishProducer is one producer the check drives phase by phase.
type vanishProducer interface {
	// send produces recs and waits for every outcome; a record left
	// unanswered past limit is the hang, returned as an error.
	send(ctx context.Context, recs []Rec, limit time.Duration) ([]outcome, error)
	// close ends the producer; it is idempotent.
	close(ctx context.Context) error
	// instances says how the client was run, for the notes.
	instances() string
}

// vanish: a record is acknowledged; then the partition's owner vanishes and
// a broker that is not live takes it; every record produced then must be
// answered within the client's delivery timeout plus slack; then the
// partition is freed, and a record must be acknowledged and read back.
func (h *harness) vanish(t *testing.T) (string, error) {
	ctx, cancel := h.within(3 * time.Minute)
	defer cancel()
	topic := strings.NewReplacer(" ", "-", "/", "-").Replace(h.d.name() + "-vanish")
	// One partition, so that every client's partitioner picks the one
	// that is stranded.
	if err := createTopic(ctx, h.tg.bootstrap(), topic, 1); err != nil {
		return "", err
	}
	// A first record, from a producer of its own, gets the partition
	// acquired: the producer under test then learns the owner's epoch from
	// its first metadata, as a long-running client knows it. (A client that
	// saw only the never-owned -1 would not replay issue 11's hang: kgo
	// hung on an epoch going back to -1 from one it knew.)
	warm := makeRecords(topic, 0, 1)
	if err := produceAll(ctx, h.d, h.tg.bootstrap(), topic, warm, produceOpts{}); err != nil {
		return "", fmt.Errorf("before the owner vanished: %w", err)
	}
	limit := vanishDelivery + vanishSlack
	p := h.newVanishProducer(ctx, topic)
	defer func() { _ = p.close(ctx) }()
	acked, err := sendAcked(ctx, p, makeRecords(topic, 1, 1), limit)
	if err != nil {
		return "", fmt.Errorf("before the owner vanished: %w", err)
	}
	acked = append(warm, acked...)
	release, err := h.tg.strandOwner(ctx, topic, 0)
	if errors.Is(err, errNotSupported) {
		return "the target has no partition ownership to strand", err
	}
	if err != nil {
		return "", err
	}
	released := false
	defer func() {
		if !released {
			_ = release(context.WithoutCancel(ctx))
		}
	}()
	outs, err := p.send(ctx, makeRecords(topic, 2, vanishRecords), limit)
	notes := []string{"while a broker that is not live held the partition: " + describeOutcomes(t, outs)}
	if err != nil {
		return strings.Join(notes, "; "), err
	}
	acked = append(acked, ackedOf(outs)...)
	released = true
	if err := release(ctx); err != nil {
		return strings.Join(notes, "; "), err
	}
	more, how, err := h.produceAfterRelease(ctx, t, p, topic, limit)
	notes = append(notes, how)
	if err != nil {
		return strings.Join(notes, "; "), err
	}
	acked = append(acked, more...)
	err = h.readBackAcked(ctx, t, topic, acked)
	t.Logf("vanish: notes: %s", strings.Join(notes, "; "))
	return strings.Join(notes, "; "), err
}

func (h *harness) newVanishProducer(ctx context.Context, topic string) vanishProducer {
	if h.d.reportsEach() {
		return startLiveProducer(ctx, h, topic)
	}
	return &phaseProducer{h: h, topic: topic}
}

// produceAfterRelease produces one record at a time with p until one is
// acknowledged (at most vanishTries); if none is, one more with a new
// producer instance. It says which did it.
func (h *harness) produceAfterRelease(ctx context.Context, t *testing.T, p vanishProducer, topic string, limit time.Duration) ([]Rec, string, error) {
	seq := 2 + vanishRecords
	var seen []string
	for i := 0; i < vanishTries; i++ {
		outs, err := p.send(ctx, makeRecords(topic, seq, 1), limit)
		seq++
		if err != nil {
			return nil, "after the partition was free: " + describeOutcomes(t, outs), err
		}
		if outs[0].err == nil {
			describeOutcomes(t, outs) // to the log
			return ackedOf(outs), fmt.Sprintf("once the partition was free, the next record was acknowledged (try %d, %s) after %s",
				i+1, p.instances(), outs[0].after.Round(time.Second)), nil
		}
		seen = append(seen, describeOutcomes(t, outs))
	}
	if err := p.close(ctx); err != nil {
		t.Logf("vanish: closing the first producer: %v", err)
	}
	fresh := h.newVanishProducer(ctx, topic)
	defer func() { _ = fresh.close(ctx) }()
	acked, err := sendAcked(ctx, fresh, makeRecords(topic, seq, 1), limit)
	if err != nil {
		return nil, fmt.Sprintf("after the partition was free the same producer failed %d records (%s)", vanishTries, strings.Join(seen, "; ")),
			fmt.Errorf("a new producer instance after the partition was free: %w", err)
	}
	return acked, fmt.Sprintf("after the partition was free the same producer failed %d records (%s); a new producer instance was acknowledged",
		vanishTries, strings.Join(seen, "; ")), nil
}

// sendAcked sends recs and fails unless every one was acknowledged.
func sendAcked(ctx context.Context, p vanishProducer, recs []Rec, limit time.Duration) ([]Rec, error) {
	outs, err := p.send(ctx, recs, limit)
	if err != nil {
		return nil, err
	}
	for _, o := range outs {
		if o.err != nil {
			return nil, fmt.Errorf("record %s not acknowledged after %s: %w", short(o.rec.Value), o.after.Round(time.Millisecond), o.err)
		}
	}
	return ackedOf(outs), nil
}

// readBackAcked reads the topic from the beginning until every acknowledged
// record arrived. Records answered with an error may be stored too.
func (h *harness) readBackAcked(ctx context.Context, t *testing.T, topic string, acked []Rec) error {
	s, err := h.startConsumer(ctx, t, topic, "")
	if err != nil {
		return err
	}
	col := collect(s)
	want := valueSet(acked)
	waitErr := col.waitUntil(ctx, 60*time.Second, fmt.Sprintf("consumer to see %d acknowledged records", len(acked)), func(per [][]Rec) bool {
		return countValues(per, want) >= len(want)
	})
	if err := errors.Join(waitErr, s.stop(ctx)); err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	return nil
}

func ackedOf(outs []outcome) []Rec {
	var out []Rec
	for _, o := range outs {
		if o.err == nil {
			out = append(out, o.rec)
		}
	}
	return out
}

// describeOutcomes says, for the doc, how many records were acknowledged or
// failed, when (to the second: the doc should change only when a result
// does) and with which distinct errors; the log gets every record.
func describeOutcomes(t *testing.T, outs []outcome) string {
	if len(outs) == 0 {
		return "no record answered"
	}
	var errs []string
	okN, errN := 0, 0
	slowest := time.Duration(0)
	for _, o := range outs {
		t.Logf("vanish: %s: %v after %s", short(o.rec.Value), o.err, o.after.Round(time.Millisecond))
		slowest = max(slowest, o.after)
		if o.err == nil {
			okN++
			continue
		}
		errN++
		// A subprocess's stderr tail (timestamps, ports) stays in the log.
		e, _, _ := strings.Cut(o.err.Error(), " (stderr: ")
		if !slices.Contains(errs, e) {
			errs = append(errs, e)
		}
	}
	var parts []string
	if okN > 0 {
		parts = append(parts, fmt.Sprintf("%d acknowledged", okN))
	}
	if errN > 0 {
		parts = append(parts, fmt.Sprintf("%d failed (%s)", errN, strings.Join(errs, " / ")))
	}
	return fmt.Sprintf("%s, the last answered after %s", strings.Join(parts, ", "), slowest.Round(time.Second))
}

// hangError is a record the client left unanswered past the bound.
func hangError(pending map[string]bool, limit time.Duration) error {
	return fmt.Errorf("%d records unanswered after %s (delivery timeout %s): the client hangs", len(pending), limit, vanishDelivery)
}
