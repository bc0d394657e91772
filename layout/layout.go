// Package layout is the etcd key and value contract between brokers and
// proxies (docs/etcd-layout.md explains it in prose). Brokers write every key;
// proxies only read and watch the keys under MetaPrefix.
//
// Keys under MetaPrefix change only when ownership or membership changes, so
// proxies can watch them cheaply. Keys that change on every commit (partition
// state, segments, group state) live outside MetaPrefix so that no proxy
// receives a watch event per produce.
package layout

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultPrefix is the root of every key kproxy writes.
const DefaultPrefix = "/kproxy"

// Layout builds and parses keys under one root prefix.
type Layout struct {
	prefix string // always without a trailing slash
}

// New returns the layout rooted at prefix ("" means DefaultPrefix).
func New(prefix string) Layout {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return Layout{prefix: strings.TrimRight(prefix, "/")}
}

// Prefix is the root prefix, without a trailing slash.
func (l Layout) Prefix() string { return l.prefix }

// MetaPrefix covers every key a proxy needs for routing.
func (l Layout) MetaPrefix() string { return l.prefix + "/meta/" }

// LogPrefix covers partition state and segment keys.
func (l Layout) LogPrefix() string { return l.prefix + "/log/" }

// GroupPrefix covers group state keys.
func (l Layout) GroupPrefix() string { return l.prefix + "/groups/" }

// BrokerKey holds a BrokerInfo under the broker's session lease.
func (l Layout) BrokerKey(id int32) string {
	return l.MetaPrefix() + "brokers/" + strconv.FormatInt(int64(id), 10)
}

// TopicKey holds a TopicInfo; it has no lease.
func (l Layout) TopicKey(topic string) string { return l.MetaPrefix() + "topics/" + topic }

// OwnerKey holds an Owner under the owning broker's session lease. Its create
// revision is the fencing token of the current ownership.
func (l Layout) OwnerKey(topic string, partition int32) string {
	return l.MetaPrefix() + "owners/" + topic + "/" + itoa(partition)
}

// EpochKey is written (with an empty value) in the same transaction that
// creates OwnerKey; its version is the partition's leader epoch.
func (l Layout) EpochKey(topic string, partition int32) string {
	return l.MetaPrefix() + "epochs/" + topic + "/" + itoa(partition)
}

// CoordinatorKey holds an Owner for a consumer group under the coordinating
// broker's session lease.
func (l Layout) CoordinatorKey(group string) string {
	return l.MetaPrefix() + "coordinators/" + group
}

// CoordinatorEpochKey is the group's counterpart of EpochKey.
func (l Layout) CoordinatorEpochKey(group string) string {
	return l.MetaPrefix() + "coordinator-epochs/" + group
}

// PartitionStateKey holds a PartitionState, changed only by fenced commits.
func (l Layout) PartitionStateKey(topic string, partition int32) string {
	return l.PartitionLogPrefix(topic, partition) + "state"
}

// PartitionLogPrefix covers a partition's state key and segment keys.
func (l Layout) PartitionLogPrefix(topic string, partition int32) string {
	return l.LogPrefix() + topic + "/" + itoa(partition) + "/"
}

// SegmentKey holds a Segment. It is written in the same fenced commit that
// advances the partition state, so a segment is reachable only once committed.
// The base offset is zero-padded so that keys sort by offset.
func (l Layout) SegmentKey(topic string, partition int32, base int64) string {
	return fmt.Sprintf("%sseg/%020d", l.PartitionLogPrefix(topic, partition), base)
}

// GroupStateKey holds a GroupState, changed only by fenced commits.
func (l Layout) GroupStateKey(group string) string { return l.GroupPrefix() + group }

// ProducerIDKey holds the next free producer id block (a decimal int64).
func (l Layout) ProducerIDKey() string { return l.prefix + "/producer-ids" }

// Kind names what a parsed key is.
type Kind int

const (
	KindUnknown Kind = iota
	KindBroker
	KindTopic
	KindOwner
	KindEpoch
	KindCoordinator
	KindCoordinatorEpoch
	KindPartitionState
	KindSegment
)

// Key is a parsed key. Only the fields that the kind uses are set.
type Key struct {
	Kind      Kind
	Broker    int32
	Topic     string
	Partition int32
	Group     string
	Base      int64 // segment base offset
}

// Parse reads a key written under this layout. Unknown keys give KindUnknown.
func (l Layout) Parse(key string) Key {
	if rest, ok := strings.CutPrefix(key, l.MetaPrefix()); ok {
		return parseMeta(rest)
	}
	if rest, ok := strings.CutPrefix(key, l.LogPrefix()); ok {
		return parseLog(rest)
	}
	return Key{}
}

func parseMeta(rest string) Key {
	kind, name, ok := strings.Cut(rest, "/")
	if !ok || name == "" {
		return Key{}
	}
	switch kind {
	case "brokers":
		id, err := strconv.ParseInt(name, 10, 32)
		if err != nil {
			return Key{}
		}
		return Key{Kind: KindBroker, Broker: int32(id)}
	case "topics":
		return Key{Kind: KindTopic, Topic: name}
	case "owners", "epochs":
		topic, p, ok := topicPartition(name)
		if !ok {
			return Key{}
		}
		k := Key{Kind: KindOwner, Topic: topic, Partition: p}
		if kind == "epochs" {
			k.Kind = KindEpoch
		}
		return k
	case "coordinators":
		return Key{Kind: KindCoordinator, Group: name}
	case "coordinator-epochs":
		return Key{Kind: KindCoordinatorEpoch, Group: name}
	}
	return Key{}
}

func parseLog(rest string) Key {
	// rest is "<topic>/<partition>/state" or "<topic>/<partition>/seg/<base>".
	parts := strings.Split(rest, "/")
	if len(parts) < 3 {
		return Key{}
	}
	p, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil {
		return Key{}
	}
	k := Key{Topic: parts[0], Partition: int32(p)}
	switch {
	case len(parts) == 3 && parts[2] == "state":
		k.Kind = KindPartitionState
	case len(parts) == 4 && parts[2] == "seg":
		base, err := strconv.ParseInt(parts[3], 10, 64)
		if err != nil {
			return Key{}
		}
		k.Kind, k.Base = KindSegment, base
	default:
		return Key{}
	}
	return k
}

// topicPartition splits "<topic>/<partition>". Topic names cannot contain '/'.
func topicPartition(s string) (string, int32, bool) {
	i := strings.LastIndexByte(s, '/')
	if i <= 0 {
		return "", 0, false
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil || p < 0 {
		return "", 0, false
	}
	return s[:i], int32(p), true
}

func itoa(v int32) string { return strconv.FormatInt(int64(v), 10) }

// BrokerInfo is the value of BrokerKey.
type BrokerInfo struct {
	ID      int32     `json:"id"`
	Addr    string    `json:"addr"` // host:port clients of the broker dial
	Rack    string    `json:"rack,omitempty"`
	Started time.Time `json:"started"`
}

// TopicInfo is the value of TopicKey.
type TopicInfo struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"` // 32 hex digits: the Kafka topic UUID
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// Owner is the value of OwnerKey and CoordinatorKey.
type Owner struct {
	Broker int32 `json:"broker"`
}

// Segment is the value of SegmentKey: one immutable object holding record
// batches for offsets [Base, Last], stored exactly as producers sent them
// except for their base offsets.
type Segment struct {
	Object       string `json:"object"` // object store key
	Base         int64  `json:"base"`
	Last         int64  `json:"last"`
	Bytes        int64  `json:"bytes"`
	Epoch        int32  `json:"epoch"`
	MaxTimestamp int64  `json:"max_ts"`
}

// EpochStart records the first offset written under a leader epoch.
type EpochStart struct {
	Epoch int32 `json:"epoch"`
	Start int64 `json:"start"`
}

// ProducerBatch is one of the last batches an idempotent producer wrote.
type ProducerBatch struct {
	FirstSeq   int32 `json:"first_seq"`
	LastSeq    int32 `json:"last_seq"`
	BaseOffset int64 `json:"base_offset"`
	Timestamp  int64 `json:"ts"` // log append time in ms
}

// ProducerState is an idempotent producer's state within one partition.
type ProducerState struct {
	Epoch   int16           `json:"epoch"`
	Batches []ProducerBatch `json:"batches"` // oldest first, at most 5
}

// PartitionState is the value of PartitionStateKey. End is the next offset to
// assign and the high watermark: only committed offsets are below it.
type PartitionState struct {
	LogStart  int64                   `json:"log_start"`
	End       int64                   `json:"end"`
	Epochs    []EpochStart            `json:"epochs,omitempty"`
	Producers map[int64]ProducerState `json:"producers,omitempty"`
}

// GroupOffset is one committed offset of a consumer group.
type GroupOffset struct {
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leader_epoch"`
	Metadata    string `json:"metadata,omitempty"`
	CommitTime  int64  `json:"commit_ms"`
}

// GroupState is the value of GroupStateKey: committed offsets by topic and
// partition.
type GroupState struct {
	Offsets map[string]map[int32]GroupOffset `json:"offsets,omitempty"`
}

// Marshal encodes a value for etcd.
func Marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value type above is plain data; failure here is a programming error.
		panic(fmt.Sprintf("layout: marshal %T: %v", v, err))
	}
	return string(b)
}

// Unmarshal decodes a value read from etcd.
func Unmarshal(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	return nil
}
