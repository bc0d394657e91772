package scale

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// Env is one cold start's processes: `kproxy etcd`, the brokers and the
// proxies, each its own process, started fresh so that runs do not share
// state. `make scale` starts one per size; integration's 30,000-partition
// test starts one too, so both measure the same set-up.
type Env struct {
	stack    *testrig.Stack
	endpoint string
	cli      *clientv3.Client
	rig      *testrig.Cluster
	layout   layout.Layout
}

// EnvConfig says how many of each to run.
type EnvConfig struct {
	Dir, Kproxy      string // work folder; the kproxy binary (testrig.Build)
	Brokers, Proxies int
	LeaseTTL         time.Duration // 0: the brokers' default
	Name             string        // folder under Dir for this run's logs
	// BrokerFlags and ProxyFlags, if set, give one broker's (by id) and
	// one proxy's (by index from 0) own flags (`make zones`: --rack,
	// --zone, --fetch-from).
	BrokerFlags func(id int32) []string
	ProxyFlags  func(i int) []string
	// Store is the brokers' --store (default "memory": each broker its
	// own, so no broker can read another's segments).
	Store string
}

// StartEnv starts etcd, then cfg.Brokers brokers (ids 1 up, memory store)
// and cfg.Proxies proxies (testrig.StartStack), and returns once each is
// ready; on an error everything it started is stopped again.
func StartEnv(ctx context.Context, cfg EnvConfig) (*Env, error) {
	st, err := testrig.StartStack(ctx, testrig.StackConfig{
		Kproxy: cfg.Kproxy, LogDir: filepath.Join(cfg.Dir, cfg.Name),
		Cluster: testrig.ClusterConfig{Store: cfg.Store, LeaseTTL: cfg.LeaseTTL, LogLevel: "warn"},
		Brokers: cfg.Brokers, Proxies: cfg.Proxies, BrokerFlags: cfg.BrokerFlags, ProxyFlags: cfg.ProxyFlags,
	})
	if err != nil {
		return nil, err
	}
	return &Env{stack: st, endpoint: st.Endpoint, cli: st.Client, rig: st.Cluster, layout: layout.New("")}, nil
}

// Rig is the brokers and proxies.
func (e *Env) Rig() *testrig.Cluster { return e.rig }

// Close stops every process and removes etcd's data.
func (e *Env) Close() { e.stack.Close() }

// PutTopic writes topic's key straight to etcd (as CreateTopics would) and
// waits until every proxy's table is complete up to it.
func (e *Env) PutTopic(ctx context.Context, topic string, partitions int32) error {
	id, err := topicID()
	if err != nil {
		return err
	}
	info := layout.TopicInfo{Name: topic, ID: id, Partitions: partitions}
	resp, err := e.cli.Put(ctx, e.layout.TopicKey(topic), layout.Marshal(info))
	if err != nil {
		return fmt.Errorf("put topic %s: %w", topic, err)
	}
	return e.waitProxies(ctx, resp.Header.Revision, time.Minute)
}

// waitProxies waits until every proxy's routing table is complete up to
// etcd revision rev (its /readyz revision).
func (e *Env) waitProxies(ctx context.Context, rev int64, timeout time.Duration) error {
	for _, p := range e.rig.Proxies {
		if err := waitRevision(ctx, p.AdminAddr, rev, timeout); err != nil {
			return fmt.Errorf("%s: %w", p.Proc.Name(), err)
		}
	}
	return nil
}

// WaitTopic waits until every proxy's routing table holds topic, created by
// whatever means (CreateTopics through one proxy, say): it reads the topic's
// key from etcd and waits for that revision.
func (e *Env) WaitTopic(ctx context.Context, topic string, timeout time.Duration) error {
	resp, err := e.cli.Get(ctx, e.layout.TopicKey(topic))
	if err != nil {
		return fmt.Errorf("read topic %s: %w", topic, err)
	}
	if len(resp.Kvs) == 0 {
		return fmt.Errorf("topic %s is not in etcd", topic)
	}
	return e.waitProxies(ctx, resp.Header.Revision, timeout)
}
