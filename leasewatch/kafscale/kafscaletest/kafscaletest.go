// Package kafscaletest writes etcd keys exactly as KafScale's brokers and
// operator write them (docs/kafscale.md lists them), for tests of kproxy's KafScale routing source: KafScale
// itself is not on the Go module proxy and cannot run in CI. It reproduces
// the key layout and lease behaviour only, not a broker: one session lease
// per broker shared by all its partition keys and a second one for its
// group keys, acquisition by create-if-absent, revocation on graceful
// shutdown and expiry after a crash. It is for tests only.
package kafscaletest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Addr is a broker's entry in the metadata snapshot.
type Addr struct {
	ID   int32
	Host string
	Port int32
	Rack *string
}

// Topic is a topic's entry in the metadata snapshot.
type Topic struct {
	Name       string
	ID         [16]byte // KafScale: the first 16 bytes of SHA-1 of the name
	Partitions int32
}

// SnapshotKey is the metadata snapshot key under prefix.
func SnapshotKey(prefix string) string { return root(prefix) + "metadata/snapshot" }

// PartitionKey is a partition's lease key under prefix.
func PartitionKey(prefix, topic string, p int32) string {
	return root(prefix) + "partition-leases/" + topic + "/" + strconv.Itoa(int(p))
}

// GroupKey is a group's lease key under prefix.
func GroupKey(prefix, group string) string { return root(prefix) + "group-leases/" + group }

func root(prefix string) string { return strings.TrimRight(prefix, "/") + "/" }

// SnapshotJSON is the snapshot as KafScale stores it: encoding/json of a
// kmsg.MetadataResponse, so Go field names and TopicID as 16 numbers.
func SnapshotJSON(brokers []Addr, topics []Topic) []byte {
	resp := kmsg.NewMetadataResponse()
	for _, b := range brokers {
		resp.Brokers = append(resp.Brokers, kmsg.MetadataResponseBroker{NodeID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	for _, t := range topics {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.TopicID = kmsg.StringPtr(t.Name), t.ID
		for p := range t.Partitions {
			rp := kmsg.NewMetadataResponseTopicPartition()
			rp.Partition = p // Leader and epochs are KafScale's guesses; routing ignores them
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	resp.ClusterID = kmsg.StringPtr("kafscale-test")
	out, err := json.Marshal(&resp)
	if err != nil {
		panic(fmt.Sprintf("kafscaletest: marshal snapshot: %v", err)) // plain data: cannot fail
	}
	return out
}

// PutSnapshot writes the snapshot with a plain Put, as brokers do after
// CreateTopics; it returns the revision.
func PutSnapshot(ctx context.Context, cli *clientv3.Client, prefix string, brokers []Addr, topics []Topic) (int64, error) {
	resp, err := cli.Put(ctx, SnapshotKey(prefix), string(SnapshotJSON(brokers, topics)))
	if err != nil {
		return 0, fmt.Errorf("put snapshot: %w", err)
	}
	return resp.Header.Revision, nil
}

// Broker holds a KafScale broker's two session leases.
type Broker struct {
	ID     int32
	cli    *clientv3.Client
	prefix string
	parts  clientv3.LeaseID
	groups clientv3.LeaseID
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// StartBroker grants the broker's partition and group leases with ttl
// seconds (KafScale: 10) and keeps them alive until Shutdown or Crash.
func StartBroker(ctx context.Context, cli *clientv3.Client, prefix string, id int32, ttl int64) (*Broker, error) {
	b := &Broker{ID: id, cli: cli, prefix: prefix}
	for _, l := range []*clientv3.LeaseID{&b.parts, &b.groups} {
		g, err := cli.Grant(ctx, ttl)
		if err != nil {
			return nil, fmt.Errorf("broker %d: grant lease: %w", id, err)
		}
		*l = g.ID
	}
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stop = stop
	for _, l := range []clientv3.LeaseID{b.parts, b.groups} {
		ch, err := cli.KeepAlive(kctx, l)
		if err != nil {
			stop()
			return nil, fmt.Errorf("broker %d: keep lease alive: %w", id, err)
		}
		b.wg.Go(func() {
			for range ch { // drained until kctx ends
			}
		})
	}
	return b, nil
}

// AcquirePartition does what a KafScale broker does on the first Produce
// to a partition: create the lease key if absent, else read it. It returns
// the owner (b.ID when b won).
func (b *Broker) AcquirePartition(ctx context.Context, topic string, p int32) (int32, error) {
	return b.acquire(ctx, PartitionKey(b.prefix, topic, p), b.parts)
}

// AcquireGroup does the same for a group on any group API.
func (b *Broker) AcquireGroup(ctx context.Context, group string) (int32, error) {
	return b.acquire(ctx, GroupKey(b.prefix, group), b.groups)
}

func (b *Broker) acquire(ctx context.Context, key string, lease clientv3.LeaseID) (int32, error) {
	resp, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, strconv.Itoa(int(b.ID)), clientv3.WithLease(lease))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return -1, fmt.Errorf("broker %d: acquire %s: %w", b.ID, key, err)
	}
	if resp.Succeeded {
		return b.ID, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return -1, fmt.Errorf("broker %d: acquire %s: lost and gone", b.ID, key)
	}
	owner, err := strconv.ParseInt(string(kvs[0].Value), 10, 32)
	if err != nil {
		return -1, fmt.Errorf("broker %d: owner of %s: %w", b.ID, key, err)
	}
	return int32(owner), nil
}

// Shutdown is a graceful stop: both leases are revoked, so all the
// broker's keys go at once.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.stopKeepAlive()
	for _, l := range []clientv3.LeaseID{b.parts, b.groups} {
		if _, err := b.cli.Revoke(ctx, l); err != nil {
			return fmt.Errorf("broker %d: revoke lease: %w", b.ID, err)
		}
	}
	return nil
}

// Crash stops the keepalives: the keys go when the leases run out.
func (b *Broker) Crash() { b.stopKeepAlive() }

func (b *Broker) stopKeepAlive() {
	b.stop()
	b.wg.Wait()
}
