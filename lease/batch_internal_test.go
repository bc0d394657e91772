package lease

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
)

// TestBatcherHoldsWhileKeepaliveLate: while hold says keepalives are late,
// nothing is sent (a caller that gives up meanwhile gets the definite
// ErrNotSent and etcd has nothing); once it clears, items go out.
func TestBatcherHoldsWhileKeepaliveLate(t *testing.T) {
	_, cli := etcdtest.Start(t)
	var late atomic.Bool
	late.Store(true)
	b := &batcher{name: "acquire", cli: cli, maxOps: 128, maxBytes: 1 << 20, timeout: 5 * time.Second,
		hold: late.Load, log: slog.New(slog.DiscardHandler), stats: &batchStats{},
		slots: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.run(ctx)
	}()
	defer func() { cancel(); <-done }()

	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	a := b.do(short, newItem("held", nil, []clientv3.Op{clientv3.OpPut("held", "v")}, nil, 5))
	if !errors.Is(a.err, ErrNotSent) {
		t.Fatalf("item while keepalives are late = %+v; want ErrNotSent", a)
	}
	if resp, err := cli.Get(ctx, "held"); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("held item reached etcd: %v %v", resp, err)
	}
	late.Store(false)
	wait, cancelWait := context.WithTimeout(ctx, 10*time.Second)
	defer cancelWait()
	a = b.do(wait, newItem("sent", nil, []clientv3.Op{clientv3.OpPut("sent", "v")}, nil, 5))
	if a.err != nil || a.resp == nil || !a.resp.Succeeded || a.rev == 0 {
		t.Fatalf("item once keepalives are answered = %+v", a)
	}
}
