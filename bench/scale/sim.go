package scale

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
)

// SimResult is the proxies' watch and table with many simulated brokers:
// lease sessions, broker keys (addresses nobody listens on) and owner keys
// written straight to etcd, no broker process.
type SimResult struct {
	Brokers    int `json:"brokers"`
	Topics     int `json:"topics"`
	Partitions int `json:"partitions"`
	// Load is how long writing every key took; Sync how long the proxies
	// then took from start to ready with the whole table.
	Load time.Duration `json:"load"`
	Sync time.Duration `json:"sync"`
	ProxyFigures
}

// maxTxnOps is etcd's default --max-txn-ops.
const maxTxnOps = 128

// simTopicPartitions is the partition count of each simulated topic.
const simTopicPartitions = 100

func (r *runner) simulate(ctx context.Context, brokers, partitions int) (res SimResult, err error) {
	topics := max(partitions/simTopicPartitions, 1)
	res = SimResult{Brokers: brokers, Topics: topics, Partitions: topics * simTopicPartitions}
	r.cfg.Logger.Info("scale: simulated brokers", "brokers", brokers, "partitions", res.Partitions)
	e, err := StartEnv(ctx, EnvConfig{Dir: r.dir, Kproxy: r.kproxy, Name: fmt.Sprintf("sim%d", brokers)})
	if err != nil {
		return res, err
	}
	defer e.Close()
	start := time.Now()
	if err := loadSim(ctx, e, brokers, topics); err != nil {
		return res, err
	}
	res.Load = time.Since(start)
	for range 2 {
		if _, err := e.rig.AddProxy(); err != nil {
			return res, err
		}
	}
	start = time.Now()
	for _, p := range e.rig.Proxies {
		if err := e.rig.StartProxy(ctx, p, brokers); err != nil {
			return res, err
		}
	}
	res.Sync = time.Since(start)
	res.ProxyFigures, err = proxyFigures(ctx, e, simTopic(0), r.cfg.ConvergenceSamples,
		func(i int) int32 { return int32(i%brokers + 1) })
	return res, err
}

func simTopic(i int) string { return fmt.Sprintf("sim-%04d", i) }

// simBroker is broker id's fake address: nothing listens there.
func simBroker(id int32) layout.BrokerInfo {
	return layout.BrokerInfo{ID: id, Addr: fmt.Sprintf("sim-broker-%d.invalid:9092", id), Started: time.Now()}
}

// loadSim writes brokers lease sessions with their broker keys, topics of
// simTopicPartitions partitions and an owner (under its broker's lease) and
// epoch key for every partition, spread round-robin, in transactions of
// etcd's default maximum size.
func loadSim(ctx context.Context, e *Env, brokers, topics int) error {
	leases := make([]clientv3.LeaseID, brokers)
	var ops []clientv3.Op
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		_, err := e.cli.Txn(ctx).Then(ops...).Commit()
		ops = ops[:0]
		if err != nil {
			return fmt.Errorf("simulated keys: %w", err)
		}
		return nil
	}
	add := func(op clientv3.Op) error {
		ops = append(ops, op)
		if len(ops) == maxTxnOps {
			return flush()
		}
		return nil
	}
	for i := range brokers {
		// Long enough for the whole run: nothing keeps these alive.
		g, err := e.cli.Grant(ctx, int64((time.Hour).Seconds()))
		if err != nil {
			return fmt.Errorf("simulated lease: %w", err)
		}
		leases[i] = g.ID
		id := int32(i + 1)
		if err := add(clientv3.OpPut(e.layout.BrokerKey(id), layout.Marshal(simBroker(id)), clientv3.WithLease(g.ID))); err != nil {
			return err
		}
	}
	n := 0
	for t := range topics {
		id, err := topicID()
		if err != nil {
			return err
		}
		name := simTopic(t)
		info := layout.TopicInfo{Name: name, ID: id, Partitions: simTopicPartitions}
		if err := add(clientv3.OpPut(e.layout.TopicKey(name), layout.Marshal(info))); err != nil {
			return err
		}
		for p := range int32(simTopicPartitions) {
			b := n % brokers
			n++
			if err := add(clientv3.OpPut(e.layout.EpochKey(name, p), "")); err != nil {
				return err
			}
			owner := layout.Marshal(layout.Owner{Broker: int32(b + 1)})
			if err := add(clientv3.OpPut(e.layout.OwnerKey(name, p), owner, clientv3.WithLease(leases[b]))); err != nil {
				return err
			}
		}
	}
	return flush()
}
