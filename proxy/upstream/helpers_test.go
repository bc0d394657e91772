package upstream

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const testWait = 5 * time.Second

type resolver struct {
	mu    sync.Mutex
	addrs map[int32]string
}

const (
	keyFetch     = int16(kmsg.Fetch)
	keyProduce   = int16(kmsg.Produce)
	keyJoinGroup = int16(kmsg.JoinGroup)
	keySyncGroup = int16(kmsg.SyncGroup)
)

func (r *resolver) set(id int32, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.addrs == nil {
		r.addrs = map[int32]string{}
	}
	r.addrs[id] = addr
}

func (r *resolver) del(id int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.addrs, id)
}

func (r *resolver) resolve(id int32) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.addrs[id]
	return a, ok
}

// newTestPool returns a pool closed when the test ends, with short redial
// backoffs.
// inOrderPool is a pool for cfg in front of one in-order fake broker, broker 1.
func inOrderPool(t *testing.T, cfg Config) (*fakeBroker, *Pool, *prometheus.Registry) {
	t.Helper()
	fb := newInOrderFakeBroker(t)
	res := &resolver{}
	res.set(1, fb.addr())
	p, reg := newTestPool(t, cfg, res)
	return fb, p, reg
}

func newTestPool(t *testing.T, cfg Config, res *resolver) (*Pool, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Resolve = res.resolve
	cfg.Registerer = reg
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin = 5 * time.Millisecond
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = 20 * time.Millisecond
	}
	p := NewPool(cfg)
	t.Cleanup(p.Close)
	return p, reg
}

func recv(t *testing.T, fb *fakeBroker) *received {
	t.Helper()
	select {
	case r := <-fb.reqs:
		return r
	case <-time.After(testWait):
		t.Fatalf("fake broker got no request within %s", testWait)
		return nil
	}
}

func send(t *testing.T, p *Pool, broker int32, aff uint64, version int16, topic string) Pending {
	t.Helper()
	pend, err := p.Send(context.Background(), broker, aff, Request{Key: 3, Version: version, Body: Raw(metadataReq(version, topic))})
	if err != nil {
		t.Fatalf("send %s: %v", topic, err)
	}
	return pend
}

func wait(t *testing.T, pend Pending) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	body, err := pend.Wait(ctx)
	if ctx.Err() != nil {
		t.Fatalf("no answer within %s", testWait)
	}
	return body, err
}

// sendAndWait sends to broker 1 and returns the error of Send or of Wait: a
// dial that fails fast may fail the request before Send has queued it.
func sendAndWait(t *testing.T, p *Pool, topic string) error {
	t.Helper()
	pend, err := p.Send(context.Background(), 1, 0, Request{Key: 3, Version: 12, Body: Raw(metadataReq(12, topic))})
	if err != nil {
		return err
	}
	_, err = wait(t, pend)
	return err
}

func expectClosed(t *testing.T, fb *fakeBroker, what string) {
	t.Helper()
	select {
	case <-fb.closed:
	case <-time.After(testWait):
		t.Fatalf("%s: connection still open after %s", what, testWait)
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for: %s", testWait, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// learnShape has p learn broker 1's shape (the first Send waits for the
// first handshake, which tells it), then loses that connection, so that
// the next Sends queue on a new connection whose handshake fb holds until
// the test sends on hold.
func learnShape(t *testing.T, p *Pool, fb *fakeBroker, hold chan struct{}) {
	t.Helper()
	go func() { hold <- struct{}{} }()
	warm := send(t, p, 1, 0, 12, "warm")
	echo(recv(t, fb))
	if _, err := wait(t, warm); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	fb.kill(0)
	waitFor(t, func() bool { c := p.published(1).shared[0].cur.Load(); return c == nil || c.dying.Load() }, "the pool to see its connection closed")
}
