package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/broker-stub/lease"
	"github.com/kproxy/kproxy/internal/etcdlocal"
	"github.com/kproxy/kproxy/layout"
)

// A broker acquires a partition, commits new state through the fence, and
// hands the partition over; a stale commit afterwards is refused.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := etcdlocal.Start(ctx, etcdlocal.Config{UnsafeNoFsync: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()

	l := layout.New("")
	sess, err := lease.NewSession(ctx, lease.Config{Client: cli, Layout: l, BrokerID: 1, TTL: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()

	r := lease.PartitionResource(l, "demo", 3)
	o, err := sess.Acquire(ctx, r)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("acquired %s epoch %d, state %q\n", o.Resource.Name, o.Epoch, o.State)

	state := layout.Marshal(layout.PartitionState{End: 5})
	if _, err := sess.FencedCommit(ctx, o, []byte(state)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("committed %s\n", o.State)

	if err := sess.Release(ctx, r); err != nil {
		fmt.Println(err)
		return
	}
	_, err = sess.FencedCommit(ctx, o, []byte(state))
	fmt.Println("commit after release refused:", errors.Is(err, lease.ErrNotOwner))
	// Output:
	// acquired demo/3 epoch 1, state ""
	// committed {"log_start":0,"end":5}
	// commit after release refused: true
}
