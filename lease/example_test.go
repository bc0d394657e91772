package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/internal/etcdlocal"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/lease"
)

// A broker that embeds the lease kit (docs/embedding.md): it registers
// itself, acquires a partition whose state it keeps under its own key,
// checks Owns before serving, commits through the fence, and hands the
// partition over; a stale commit afterwards is refused.
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

	l := layout.New("") // the contract's keys, which proxies watch
	sess, err := lease.NewSession(ctx, lease.Config{Client: cli, Layout: l, BrokerID: 1, TTL: 5 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	// LossReady signals every ownership the session drops (one Loss for a
	// fenced commit, one for everything an expired lease held): the broker
	// stops serving those partitions and forgets their cached state. Close
	// closes the channel, which ends the loop.
	lossesDone := make(chan struct{})
	go func() {
		defer close(lossesDone)
		for range sess.LossReady() {
			for _, loss := range sess.TakeLosses() {
				for _, r := range loss.Resources {
					fmt.Println("lost", r.Name, loss.Reason)
				}
			}
		}
	}()
	defer func() { sess.Close(); <-lossesDone }()
	// Proxies route only to registered brokers.
	if err := sess.RegisterBroker(ctx, layout.BrokerInfo{ID: 1, Addr: "127.0.0.1:9092"}); err != nil {
		fmt.Println(err)
		return
	}

	// The state key is the broker's own (outside layout's meta prefix).
	r := lease.PartitionResource(l, "demo", 3, "/mybroker/state/demo/3")
	o, err := sess.Acquire(ctx, r)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("acquired %s epoch %d, state %q\n", o.Resource.Name, o.Epoch, o.State)

	// On the hot path: a memory check, no etcd round trip.
	if _, ok := sess.Owns(r); !ok {
		fmt.Println("not owner: answer NOT_LEADER_OR_FOLLOWER")
		return
	}
	if _, err := sess.FencedCommit(ctx, o, []byte(`{"end":5}`)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("committed %s\n", o.State)

	if err := sess.Release(ctx, r); err != nil {
		fmt.Println(err)
		return
	}
	_, err = sess.FencedCommit(ctx, o, []byte(`{"end":6}`))
	fmt.Println("commit after release refused:", errors.Is(err, lease.ErrNotOwner))
	// Output:
	// acquired demo/3 epoch 1, state ""
	// committed {"end":5}
	// commit after release refused: true
}
