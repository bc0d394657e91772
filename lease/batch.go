package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// batcher puts the sub-transactions of many resources into one etcd
// transaction. Each item is a complete nested transaction with the compares,
// Then and Else its resource always had, so every resource gets its own
// answer from one round trip; the outer transaction has no compare. Items go
// out as soon as an in-flight slot is free: while etcd keeps up each item
// travels alone, and while it does not the queue grows and the next
// transaction carries as many items as etcd's --max-txn-ops and request size
// allow (natural batching, no artificial wait).
type batcher struct {
	name     string
	cli      *clientv3.Client
	maxOps   int // etcd --max-txn-ops
	maxBytes int // bytes of keys and values per transaction
	timeout  time.Duration
	hold     func() bool // true while sending must wait (keepalives first)
	log      *slog.Logger
	stats    *batchStats

	slots chan struct{} // one token per transaction in flight
	wake  chan struct{}
	mu    sync.Mutex
	queue []*item
	wg    sync.WaitGroup // senders
}

type batchStats struct{ txns, items, overloads atomic.Int64 }

const (
	itemQueued int32 = iota
	itemSent
	itemAbandoned
)

// item is one resource's nested transaction.
type item struct {
	key       string // one item per key in a transaction (etcd refuses duplicate puts)
	cmps      []clientv3.Cmp
	then, els []clientv3.Op
	bytes     int
	deadline  time.Time   // the caller's, zero if none
	done      chan answer // capacity 1
	state     atomic.Int32
}

// answer is an item's outcome: its own sub-transaction's response and the
// revision of the transaction that carried it, or a classified error.
type answer struct {
	resp *pb.TxnResponse
	rev  int64
	err  error
}

func newItem(key string, cmps []clientv3.Cmp, then, els []clientv3.Op, bytes int) *item {
	return &item{key: key, cmps: cmps, then: then, els: els, bytes: bytes, done: make(chan answer, 1)}
}

func (it *item) ops() int { return max(len(it.cmps), len(it.then), len(it.els)) }

func (it *item) finish(a answer) {
	select {
	case it.done <- a:
	default: // already answered
	}
}

// ErrNotSent is definite: the caller's context ended while its request was
// still queued behind other transactions, so nothing was sent.
var ErrNotSent = errors.New("lease: not sent to etcd, nothing written")

// ErrOverloaded is definite: etcd answered every attempt with back-pressure
// (too many requests) until the caller's context ended, so nothing was
// written. The ownership is intact; retry later.
var ErrOverloaded = errors.New("lease: etcd overloaded, nothing written")

// do queues it and waits for its answer. A context that ends while the item
// is still queued gives a definite error (nothing was sent); once it was
// sent the outcome is ambiguous.
func (b *batcher) do(ctx context.Context, it *item) answer {
	if err := ctx.Err(); err != nil {
		return answer{err: fmt.Errorf("%s: %w: %w", b.name, ErrNotSent, err)}
	}
	it.deadline, _ = ctx.Deadline()
	b.mu.Lock()
	b.queue = append(b.queue, it)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	select {
	case a := <-it.done:
		return a
	case <-ctx.Done():
		if it.state.CompareAndSwap(itemQueued, itemAbandoned) {
			return answer{err: fmt.Errorf("%s queued behind other etcd transactions: %w: %w", b.name, ErrNotSent, ctx.Err())}
		}
		select {
		case a := <-it.done: // answered while we gave up: keep it
			return a
		default:
		}
		return answer{err: fmt.Errorf("%w: %s sent, answer not awaited: %w", ErrAmbiguous, b.name, ctx.Err())}
	}
}

// run sends queued items until ctx ends, then answers what is left.
func (b *batcher) run(ctx context.Context) {
	defer func() {
		b.wg.Wait()
		b.mu.Lock()
		q := b.queue
		b.queue = nil
		b.mu.Unlock()
		for _, it := range q {
			it.finish(answer{err: fmt.Errorf("%s: %w", b.name, ErrClosed)})
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case b.slots <- struct{}{}:
		}
		batch := b.take(ctx)
		if batch == nil {
			<-b.slots
			return
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() { <-b.slots }()
			b.send(ctx, batch)
		}()
	}
}

// take waits for items (and for hold to clear) and takes one transaction's
// worth. nil when ctx ended.
func (b *batcher) take(ctx context.Context) []*item {
	for {
		if b.hold == nil || !b.hold() {
			if batch := b.cut(); len(batch) > 0 {
				return batch
			}
		}
		var tick <-chan time.Time
		var t *time.Timer
		if b.hold != nil && b.hold() {
			t = time.NewTimer(20 * time.Millisecond) // recheck: keepalives are answered late
			tick = t.C
		}
		select {
		case <-ctx.Done():
		case <-b.wake:
		case <-tick:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// cut removes from the queue the items of the next transaction: queue order,
// skipping abandoned items, deferring a second item for a key already in the
// transaction, within the op and byte budgets (the first item always fits).
func (b *batcher) cut() []*item {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch, rest []*item
	keys := make(map[string]bool)
	widest, size := 0, 0
	for i, it := range b.queue {
		if it.state.Load() == itemAbandoned {
			continue
		}
		w := max(widest, it.ops())
		full := len(batch) > 0 && (len(batch)+1+w > b.maxOps || size+it.bytes > b.maxBytes)
		if full {
			rest = append(rest, b.queue[i:]...)
			break
		}
		if keys[it.key] {
			rest = append(rest, it)
			continue
		}
		if !it.state.CompareAndSwap(itemQueued, itemSent) {
			continue // abandoned just now
		}
		keys[it.key] = true
		batch = append(batch, it)
		widest, size = w, size+it.bytes
	}
	b.queue = rest
	if len(rest) > 0 {
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
	return batch
}

// send commits batch, retrying etcd's back-pressure answers (definite: the
// request was refused before it was proposed) with backoff, and sending each
// item alone when etcd refuses the whole transaction for one item's sake.
func (b *batcher) send(ctx context.Context, batch []*item) {
	backoff := 10 * time.Millisecond
	for {
		resp, err := b.commit(ctx, batch)
		switch {
		case err == nil:
			for i, it := range batch {
				it.finish(answer{resp: resp.Responses[i].GetResponseTxn(), rev: resp.Header.Revision})
			}
			return
		case overloaded(err) && ctx.Err() == nil:
			b.stats.overloads.Add(1)
			b.log.Debug("etcd back-pressure; retrying batch", "batcher", b.name, "items", len(batch), "backoff", backoff, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(backoff + rand.N(backoff)):
			}
			backoff = min(2*backoff, time.Second)
			continue
		case overloaded(err):
			err = fmt.Errorf("%w: %w", ErrOverloaded, err)
		default:
			err = classify(err)
			if len(batch) > 1 && !errors.Is(err, ErrAmbiguous) {
				// Definite refusal of the whole transaction (too large,
				// a bad op): each item gets its own verdict.
				for _, it := range batch {
					b.send(ctx, []*item{it})
				}
				return
			}
		}
		for _, it := range batch {
			it.finish(answer{err: err})
		}
		return
	}
}

func (b *batcher) commit(ctx context.Context, batch []*item) (*clientv3.TxnResponse, error) {
	ops := make([]clientv3.Op, len(batch))
	for i, it := range batch {
		ops[i] = clientv3.OpTxn(it.cmps, it.then, it.els)
	}
	b.stats.txns.Add(1)
	b.stats.items.Add(int64(len(batch)))
	// As long as the most patient caller waits, and at least the timeout:
	// a batch cut short by one impatient caller is ambiguous for all.
	timeout := b.timeout
	for _, it := range batch {
		if !it.deadline.IsZero() {
			timeout = max(timeout, time.Until(it.deadline))
		}
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return b.cli.Txn(tctx).Then(ops...).Commit()
}

// overloaded reports etcd's back-pressure answers: refused before proposal,
// so nothing was applied and the same request may be sent again.
func overloaded(err error) bool {
	if errors.Is(err, rpctypes.ErrTooManyRequests) || errors.Is(err, rpctypes.ErrGRPCRequestTooManyRequests) {
		return true
	}
	if strings.Contains(err.Error(), "larger than max") {
		return false // gRPC's own message size limit: definite, and no retry helps
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) && ee.Code() == codes.ResourceExhausted {
		return true
	}
	return status.Code(err) == codes.ResourceExhausted
}
