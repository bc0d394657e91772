package compat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// liveProducer is one producer instance that lives through every phase, for
// clients that report each record's outcome in-process (reportsEach): the
// case of issue 11, where a client that had learned the owner's epoch
// never produced again.
type liveProducer struct {
	in      chan Rec
	answers chan answerAt
	done    chan struct{} // closed when produce returned
	doneErr error         // produce's result, set before done closes
	cancel  context.CancelFunc
	once    sync.Once
	closeE  error
}

type answerAt struct {
	rec Rec
	err error
	at  time.Time
}

func startLiveProducer(ctx context.Context, h *harness, topic string) *liveProducer {
	pctx, cancel := context.WithCancel(ctx)
	lp := &liveProducer{in: make(chan Rec, vanishRecords), answers: make(chan answerAt, maxLines),
		done: make(chan struct{}), cancel: cancel}
	o := produceOpts{deliveryTimeout: vanishDelivery, answered: func(r Rec, err error) {
		select {
		case lp.answers <- answerAt{r, err, time.Now()}:
		default: // more answers than records sent: a harness bug the check reports as missing answers
		}
	}}
	go func() {
		defer close(lp.done)
		_, lp.doneErr = h.d.produce(pctx, h.tg.bootstrap(), topic, lp.in, o)
	}()
	return lp
}

func (lp *liveProducer) instances() string { return "the same producer instance" }

func (lp *liveProducer) send(ctx context.Context, recs []Rec, limit time.Duration) ([]outcome, error) {
	start := time.Now()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for _, r := range recs {
		select {
		case lp.in <- r:
		case <-timer.C:
			return nil, fmt.Errorf("the client took no record for %s: the client hangs", limit)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	pending := valueSet(recs)
	var outs []outcome
	for len(pending) > 0 {
		select {
		case a := <-lp.answers:
			if !pending[a.rec.Value] {
				continue // a duplicate report
			}
			delete(pending, a.rec.Value)
			outs = append(outs, outcome{rec: a.rec, err: a.err, after: a.at.Sub(start)})
		case <-lp.done:
			return outs, fmt.Errorf("the producer ended with %d records unanswered: %v", len(pending), lp.doneErr)
		case <-timer.C:
			return outs, hangError(pending, limit)
		case <-ctx.Done():
			return outs, ctx.Err()
		}
	}
	return outs, nil
}

// close ends the input and waits for produce to return (it flushes); a
// producer that does not return within the bound is cancelled.
func (lp *liveProducer) close(ctx context.Context) error {
	lp.once.Do(func() {
		close(lp.in)
		select {
		case <-lp.done:
		case <-time.After(vanishDelivery + vanishSlack):
			lp.cancel()
			lp.closeE = errors.New("the producer did not finish after its input ended")
			select {
			case <-lp.done:
			case <-ctx.Done():
			}
		}
		lp.cancel()
	})
	return lp.closeE
}

// phaseProducer runs a new producer for every phase, for clients that run
// as subprocesses and report outcomes only when they exit: the exit is
// when every record of the phase was answered.
type phaseProducer struct {
	h     *harness
	topic string
}

func (pp *phaseProducer) instances() string {
	return "a new process per phase, as the client runs as a subprocess"
}

func (pp *phaseProducer) close(context.Context) error { return nil }

func (pp *phaseProducer) send(ctx context.Context, recs []Rec, limit time.Duration) ([]outcome, error) {
	in := make(chan Rec, len(recs))
	for _, r := range recs {
		in <- r
	}
	close(in)
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		acked []Rec
		err   error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		acked, err := pp.h.d.produce(pctx, pp.h.tg.bootstrap(), pp.topic, in, produceOpts{deliveryTimeout: vanishDelivery})
		done <- result{acked, err}
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case res := <-done:
		after := time.Since(start)
		ok := valueSet(res.acked)
		outs := make([]outcome, 0, len(recs))
		for _, r := range recs {
			o := outcome{rec: r, after: after}
			if !ok[r.Value] {
				o.err = res.err
				if o.err == nil {
					o.err = errors.New("not acknowledged")
				}
			}
			outs = append(outs, o)
		}
		return outs, nil
	case <-timer.C:
		cancel()
		<-done // the subprocess is killed with pctx
		return nil, hangError(valueSet(recs), limit)
	}
}
