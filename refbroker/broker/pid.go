package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

// pidBlock is how many producer ids one etcd transaction reserves.
const pidBlock = 1000

// pidAllocator hands out idempotent producer ids from blocks reserved with
// a compare-and-swap on ProducerIDKey, so no two brokers ever hand out the
// same id.
type pidAllocator struct {
	cli *clientv3.Client
	key string

	mu         sync.Mutex
	next, stop int64 // [next, stop) is reserved and unused
}

func newPIDAllocator(cli *clientv3.Client, l layout.Layout) *pidAllocator {
	return &pidAllocator{cli: cli, key: schema.New(l).ProducerIDKey()}
}

func (a *pidAllocator) allocate(ctx context.Context) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next < a.stop {
		a.next++
		return a.next - 1, nil
	}
	for attempt := 0; attempt < 10; attempt++ {
		got, err := a.cli.Get(ctx, a.key)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", a.key, err)
		}
		var start, rev int64
		if len(got.Kvs) > 0 {
			rev = got.Kvs[0].ModRevision
			if start, err = strconv.ParseInt(string(got.Kvs[0].Value), 10, 64); err != nil {
				return 0, fmt.Errorf("parse %s: %w", a.key, err)
			}
		}
		resp, err := a.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(a.key), "=", rev)).
			Then(clientv3.OpPut(a.key, strconv.FormatInt(start+pidBlock, 10))).
			Commit()
		if err != nil {
			return 0, fmt.Errorf("reserve producer ids at %s: %w", a.key, err)
		}
		if resp.Succeeded {
			a.next, a.stop = start+1, start+pidBlock
			return start, nil
		}
	}
	return 0, fmt.Errorf("reserve producer ids at %s: too much contention", a.key)
}

// handleInitProducerID gives every idempotent producer a fresh id, epoch 0,
// as Kafka does without a transactional id. Transactions are not supported.
func (b *Broker) handleInitProducerID(ctx context.Context, _ *conn, _ header, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		b.log.Info("refused transactional InitProducerId: transactions are not supported", "transactional_id", *req.TransactionalID)
		return resp
	}
	id, err := b.pids.allocate(ctx)
	if err != nil {
		b.log.Warn("allocate producer id", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
