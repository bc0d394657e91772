package harness

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// FailoverResult is one failover trial through the proxy.
type FailoverResult struct {
	Partition int32 `json:"partition"`
	OldOwner  int32 `json:"old_owner"`
	NewOwner  int32 `json:"new_owner"`
	// Seconds from the kill to the first acknowledged produce of a record
	// sent after the kill (only the successor can have written it).
	FailoverSeconds float64 `json:"failover_seconds"`
	// Seconds from the kill to the old owner key's deletion (lease expiry)
	// and to the successor's owner key.
	OwnerGoneSeconds float64 `json:"owner_gone_seconds"`
	NewOwnerSeconds  float64 `json:"new_owner_seconds"`
	// Errors are produce errors the application saw during the trial.
	Errors     int64  `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	Acked      int64  `json:"acked"`
}

// failoverRate is the records/s the application produces during a trial.
const failoverRate = 100

// failoverScenario kills the owner of a partition while an application
// produces to it through the proxy with kgo's default settings.
func (h *Harness) failoverScenario(ctx context.Context) error {
	if !h.selected("failover") {
		return nil
	}
	const topic = "bench-failover"
	if err := h.freshTopic(ctx, topic); err != nil {
		return err
	}
	for trial := range h.cfg.FailoverTrials {
		h.cfg.Logger.Info("scenario", "id", "failover", "trial", trial+1)
		h.at("failover", trial+1, h.cfg.FailoverTrials)
		res, err := h.failoverTrial(ctx, topic, int32(trial%benchPartitions))
		if err != nil {
			return fmt.Errorf("failover trial %d: %w", trial+1, err)
		}
		h.report.Failover = append(h.report.Failover, res)
		h.cfg.Logger.Info("failover", "seconds", res.FailoverSeconds, "errors", res.Errors)
	}
	return nil
}

// failoverApp is the application producing during a trial.
type failoverApp struct {
	mu       sync.Mutex
	killedAt time.Time // zero until the kill
	firstAck time.Time // first ack of a record sent after the kill
	acked    int64
	errors   int64
	firstErr string
	acks     chan struct{} // signalled on every ack
}

func (a *failoverApp) produce(ctx context.Context, cl *kgo.Client, p int32) {
	sent := time.Now()
	cl.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(strconv.FormatInt(sent.UnixNano(), 10))},
		func(_ *kgo.Record, err error) {
			now := time.Now()
			a.mu.Lock()
			defer a.mu.Unlock()
			if err != nil {
				if ctx.Err() == nil {
					a.errors++
					if a.firstErr == "" {
						a.firstErr = err.Error()
					}
				}
				return
			}
			a.acked++
			if !a.killedAt.IsZero() && !sent.Before(a.killedAt) && a.firstAck.IsZero() {
				a.firstAck = now
			}
			select {
			case a.acks <- struct{}{}:
			default:
			}
		})
}

// run produces failoverRate records a second to partition p until ctx ends.
func (a *failoverApp) run(ctx context.Context, cl *kgo.Client, p int32) {
	tick := time.NewTicker(time.Second / failoverRate)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			a.produce(ctx, cl, p)
		}
	}
}

// firstAckAfterKill waits up to timeout for the first acknowledgement of
// a record sent after the kill and returns when it came.
func (a *failoverApp) firstAckAfterKill(ctx context.Context, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		a.mu.Lock()
		first := a.firstAck
		a.mu.Unlock()
		if !first.IsZero() {
			return first, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("no produce acknowledged within %v of the successor's acquisition", timeout)
		}
		if err := waitFor(ctx, a.acks, time.Until(deadline), "ack after the kill"); err != nil {
			return time.Time{}, err
		}
	}
}

func (h *Harness) failoverTrial(ctx context.Context, topic string, p int32) (FailoverResult, error) {
	res := FailoverResult{Partition: p}
	c := h.cluster
	// Default client settings; only the partition is chosen by hand.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.proxy.Addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return res, fmt.Errorf("new client: %w", err)
	}
	defer cl.Close()
	app := &failoverApp{acks: make(chan struct{}, 1)}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Go(func() { app.run(runCtx, cl, p) })
	defer wg.Wait()
	defer stop()

	if err := waitFor(ctx, app.acks, 30*time.Second, "first ack before the kill"); err != nil {
		return res, err
	}
	if err := sleepUntil(ctx, time.Now().Add(2*time.Second)); err != nil {
		return res, err
	}
	owners, err := c.owners(ctx, topic)
	if err != nil {
		return res, err
	}
	owner, ok := owners[p]
	if !ok {
		return res, fmt.Errorf("%s/%d has no owner", topic, p)
	}
	res.OldOwner = owner
	wresp, err := c.etcdCli.Get(ctx, c.layout.OwnerKey(topic, p))
	if err != nil {
		return res, fmt.Errorf("read owner key: %w", err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	events := c.etcdCli.Watch(watchCtx, c.layout.OwnerKey(topic, p), clientv3.WithRev(wresp.Header.Revision+1))

	killedAt := time.Now()
	app.mu.Lock()
	app.killedAt = killedAt
	app.mu.Unlock()
	if err := c.killBroker(owner); err != nil {
		return res, err
	}
	gone, created, err := h.watchOwnerChange(ctx, events, c.cfg.leaseTTL+30*time.Second)
	if err != nil {
		return res, err
	}
	res.OwnerGoneSeconds = gone.Sub(killedAt).Seconds()
	res.NewOwnerSeconds = created.Sub(killedAt).Seconds()
	first, err := app.firstAckAfterKill(ctx, 30*time.Second)
	if err != nil {
		return res, err
	}
	res.FailoverSeconds = first.Sub(killedAt).Seconds()
	if err := sleepUntil(ctx, time.Now().Add(time.Second)); err != nil { // errors after recovery count too
		return res, err
	}
	stop()
	wg.Wait()
	app.mu.Lock()
	res.Acked, res.Errors, res.FirstError = app.acked, app.errors, app.firstErr
	app.mu.Unlock()
	if owners, err = c.owners(ctx, topic); err == nil {
		res.NewOwner = owners[p]
	}
	return res, c.restartBroker(ctx, owner)
}

// watchOwnerChange returns when the owner key was deleted and when it was
// created again.
func (h *Harness) watchOwnerChange(ctx context.Context, events clientv3.WatchChan, timeout time.Duration) (gone, created time.Time, err error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for created.IsZero() {
		select {
		case <-ctx.Done():
			return gone, created, ctx.Err()
		case <-timer.C:
			return gone, created, fmt.Errorf("owner key not replaced within %s of the kill", timeout)
		case wr, ok := <-events:
			if !ok {
				return gone, created, errors.New("owner watch closed")
			}
			if err := wr.Err(); err != nil {
				return gone, created, fmt.Errorf("owner watch: %w", err)
			}
			now := time.Now()
			for _, ev := range wr.Events {
				switch {
				case ev.Type == clientv3.EventTypeDelete && gone.IsZero():
					gone = now
				case ev.IsCreate() && !gone.IsZero():
					created = now
				}
			}
		}
	}
	return gone, created, nil
}

func waitFor(ctx context.Context, ch <-chan struct{}, timeout time.Duration, what string) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("%s: nothing within %s", what, timeout)
	}
}
