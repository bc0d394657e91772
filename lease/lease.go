// Package lease enforces partition and group ownership for a Kafka-protocol
// broker with etcd.
//
// The promise, and its limit: ownership is advisory for routing; the fenced
// commit is what makes writes safe. A Session holds one etcd lease and
// acquires resources (a partition or a group) by creating their owner key
// under that lease in a single transaction. Owns answers from memory and turns
// false as soon as the session can no longer be sure that the server still
// holds the lease (counted from when the last answered keepalive was SENT,
// minus a safety margin), so a paused or partitioned broker stops serving
// before a successor can take over. Leases are not mutual exclusion, though:
// every write that matters must go through FencedCommit, which etcd refuses
// unless the owner key still has the fencing token (its create revision) the
// writer acquired and the state key is unchanged since the writer last read it.
//
// Errors from FencedCommit are either definite (ErrFenced: nothing was written,
// the ownership is gone) or ambiguous (ErrAmbiguous: the write may or may not
// have happened; the ownership must re-read its state before serving again).
//
// Any Kafka-protocol broker can embed it (docs/embedding.md): it depends only
// on the proxy/broker contract (package layout) and etcd's client, and the key
// a broker keeps its state under is the broker's own (PartitionResource and
// GroupResource take it). A test keeps those dependencies so.
package lease

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
)

// Resource names the etcd keys that guard one partition or group. The owner
// and epoch keys are the contract's (package layout: proxies watch them); the
// state key is the broker's own, wherever it keeps the state a fenced commit
// advances (it must be outside layout's MetaPrefix).
type Resource struct {
	Name     string // for logs and metrics, e.g. "demo/3" or "group:g1"
	OwnerKey string // created under the session lease; create revision = fencing token
	EpochKey string // put in the acquiring transaction; version = epoch
	StateKey string // the caller's; changed only by FencedCommit
}

// PartitionResource is the Resource of one partition, whose state the caller
// keeps at stateKey.
func PartitionResource(l layout.Layout, topic string, partition int32, stateKey string) Resource {
	return Resource{
		Name:     fmt.Sprintf("%s/%d", topic, partition),
		OwnerKey: l.OwnerKey(topic, partition),
		EpochKey: l.EpochKey(topic, partition),
		StateKey: stateKey,
	}
}

// GroupResource is the Resource of one consumer group's coordinator, whose
// state (committed offsets) the caller keeps at stateKey.
func GroupResource(l layout.Layout, group, stateKey string) Resource {
	return Resource{
		Name:     "group:" + group,
		OwnerKey: l.CoordinatorKey(group),
		EpochKey: l.CoordinatorEpochKey(group),
		StateKey: stateKey,
	}
}

// Config configures a Session.
type Config struct {
	Client   *clientv3.Client
	Layout   layout.Layout
	BrokerID int32
	// TTL is the session lease TTL, default 10s, rounded up to whole seconds.
	// The server may grant more (it raises short TTLs); the granted TTL is used.
	TTL time.Duration
	// SafetyMargin is subtracted from every local deadline to absorb clock
	// rate differences and scheduling delays. Default max(TTL/5, 500ms).
	SafetyMargin time.Duration
	// Now is the clock for deadlines, default time.Now.
	Now func() time.Time
	// Logger defaults to a logger that discards everything.
	Logger *slog.Logger
	// EtcdConfig, when set, is the configuration Client was built from: the
	// session builds its own client from it for grants and keepalives, so
	// they never queue behind bulk traffic on Client's connection. Without
	// it keepalives share Client.
	EtcdConfig *clientv3.Config
	// MaxTxnOps is etcd's --max-txn-ops (default 128): the budget of one
	// batched transaction.
	MaxTxnOps int
	// MaxTxnBytes bounds the keys and values of one batched transaction
	// (default 1 MiB, below etcd's 1.5 MiB request limit).
	MaxTxnBytes int
	// OpTimeout bounds one batched etcd transaction (default 5s).
	OpTimeout time.Duration
	// AcquireInFlight and CommitInFlight bound the batched transactions in
	// flight (defaults 2 and 4).
	AcquireInFlight, CommitInFlight int
}

func (c Config) withDefaults() (Config, error) {
	if c.Client == nil {
		return c, errors.New("lease: Config.Client is nil")
	}
	if c.TTL <= 0 {
		c.TTL = 10 * time.Second
	}
	c.TTL = time.Duration(ttlSeconds(c.TTL)) * time.Second
	if c.SafetyMargin <= 0 {
		c.SafetyMargin = max(c.TTL/5, 500*time.Millisecond)
	}
	if c.SafetyMargin >= c.TTL*2/3 {
		// The deadline would pass before the first keepalive is answered.
		return c, fmt.Errorf("lease: SafetyMargin %v must be below 2/3 of TTL %v", c.SafetyMargin, c.TTL)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxTxnOps <= 0 {
		c.MaxTxnOps = 128
	}
	if c.MaxTxnBytes <= 0 {
		c.MaxTxnBytes = 1 << 20
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = 5 * time.Second
	}
	if c.AcquireInFlight <= 0 {
		c.AcquireInFlight = 2
	}
	if c.CommitInFlight <= 0 {
		c.CommitInFlight = 4
	}
	return c, nil
}

// ttlSeconds rounds d up to whole seconds, as etcd TTLs are whole seconds.
func ttlSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

var (
	// ErrFenced is definite: etcd refused the compare, nothing was written,
	// and the ownership has been dropped (and reported on Losses).
	ErrFenced = errors.New("lease: fenced: ownership lost, nothing written")
	// ErrAmbiguous means the outcome is unknown (timeout, lost connection).
	// The ownership stays held but must be re-read (Reread, or Acquire again)
	// before it serves or commits again.
	ErrAmbiguous = errors.New("lease: outcome unknown")
	// ErrNotOwner means this session does not hold the resource locally (or its
	// lease is no longer valid); refused without an etcd round trip.
	ErrNotOwner = errors.New("lease: not owner")
	// ErrNoLease means the session currently has no valid lease (it is
	// renewing after an expiry). Errors wrapping it also match ErrNotOwner.
	// Retriable.
	ErrNoLease = errors.New("lease: session has no valid lease")
	// ErrNeedsReread means an earlier commit was ambiguous: call Reread (or
	// Acquire) before committing again.
	ErrNeedsReread = errors.New("lease: ownership must re-read state after an ambiguous commit")
	// ErrOwnedElsewhere matches every OwnedElsewhereError.
	ErrOwnedElsewhere = errors.New("lease: owned by another broker")
	// ErrClosed means the session was closed.
	ErrClosed = errors.New("lease: session closed")
)

// OwnedElsewhereError says which broker holds a resource Acquire wanted.
type OwnedElsewhereError struct{ Broker int32 }

func (e OwnedElsewhereError) Error() string {
	return fmt.Sprintf("lease: owned by broker %d", e.Broker)
}

// Is makes errors.Is(err, ErrOwnedElsewhere) true.
func (e OwnedElsewhereError) Is(target error) bool { return target == ErrOwnedElsewhere }

// Loss reports that the session no longer holds resources it held: one
// resource after a fenced commit, or (Session true) every resource the
// expired lease held.
type Loss struct {
	Resources []Resource
	Session   bool
	Reason    error
}

// Ownership is a held resource. Resource, Epoch and Token never change. State
// and StateRev change only in FencedCommit and Reread; the holder must
// serialize those calls per ownership (one committer per partition) and read
// State/StateRev only from that committer.
type Ownership struct {
	Resource Resource
	Epoch    int32  // leader epoch: the EpochKey's version after acquisition
	Token    int64  // fencing token: the owner key's create revision
	State    []byte // state value read atomically with acquisition (nil if absent)
	StateRev int64  // state key mod revision; updated by successful FencedCommit

	lease    clientv3.LeaseID // the session lease the owner key lives under
	reread   atomic.Bool      // set by an ambiguous commit
	lost     chan struct{}    // closed once the session stops holding it
	lostOnce sync.Once
}

// NeedsReread reports whether an ambiguous commit left the state unknown.
func (o *Ownership) NeedsReread() bool { return o.reread.Load() }
