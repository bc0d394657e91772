// Package schema is the stub broker's private etcd storage: partition log
// state, segments, consumer group state and producer id blocks. Only
// refbroker reads and writes these keys; proxies never see them (they are
// outside layout's MetaPrefix), and another broker that embeds the lease kit
// brings its own state keys instead. docs/etcd-layout.md lists the keys.
//
// Keys that change on every commit live here, outside MetaPrefix, so that no
// proxy receives a watch event per produce.
package schema

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kproxy/kproxy/layout"
)

// Schema builds and parses the stub's keys under a layout's root prefix.
type Schema struct {
	prefix string // without a trailing slash
}

// New returns the schema under l's root prefix.
func New(l layout.Layout) Schema { return Schema{prefix: l.Prefix()} }

// LogPrefix covers partition state and segment keys.
func (s Schema) LogPrefix() string { return s.prefix + "/log/" }

// GroupPrefix covers group state keys.
func (s Schema) GroupPrefix() string { return s.prefix + "/groups/" }

// PartitionStateKey holds a PartitionState, changed only by fenced commits.
// It is the lease.Resource state key of the partition.
func (s Schema) PartitionStateKey(topic string, partition int32) string {
	return s.PartitionLogPrefix(topic, partition) + "state"
}

// PartitionLogPrefix covers a partition's state key and segment keys.
func (s Schema) PartitionLogPrefix(topic string, partition int32) string {
	return s.LogPrefix() + topic + "/" + strconv.FormatInt(int64(partition), 10) + "/"
}

// SegmentKey holds a Segment. It is written in the same fenced commit that
// advances the partition state, so a segment is reachable only once committed.
// The base offset is zero-padded so that keys sort by offset.
func (s Schema) SegmentKey(topic string, partition int32, base int64) string {
	return fmt.Sprintf("%sseg/%020d", s.PartitionLogPrefix(topic, partition), base)
}

// ProducerPrefix covers the idempotent-producer keys of one partition. They
// live outside LogPrefix so that no broker's log view watches them.
func (s Schema) ProducerPrefix(topic string, partition int32) string {
	return s.TopicProducerPrefix(topic) + strconv.FormatInt(int64(partition), 10) + "/"
}

// TopicProducerPrefix covers the producer keys of every partition of topic.
func (s Schema) TopicProducerPrefix(topic string) string {
	return s.prefix + "/producers/" + topic + "/"
}

// ProducerKey holds one idempotent producer's ProducerState in one
// partition. It is written, in the partition's fenced commit, only when that
// producer's state changed, so a commit's size does not grow with the
// number of producers the partition remembers.
func (s Schema) ProducerKey(topic string, partition int32, producerID int64) string {
	return s.ProducerPrefix(topic, partition) + strconv.FormatInt(producerID, 10)
}

// GroupStateKey holds a GroupState, changed only by fenced commits. It is
// the lease.Resource state key of the group.
func (s Schema) GroupStateKey(group string) string { return s.GroupPrefix() + group }

// ProducerIDKey holds the next free producer id block (a decimal int64).
func (s Schema) ProducerIDKey() string { return s.prefix + "/producer-ids" }

// Kind names what a parsed log key is.
type Kind int

const (
	KindUnknown Kind = iota
	KindPartitionState
	KindSegment
)

// Key is a parsed log key.
type Key struct {
	Kind      Kind
	Topic     string
	Partition int32
	Base      int64 // segment base offset
}

// Parse reads a key under LogPrefix. Other keys give KindUnknown.
func (s Schema) Parse(key string) Key {
	rest, ok := strings.CutPrefix(key, s.LogPrefix())
	if !ok {
		return Key{}
	}
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

// Values are JSON, encoded with layout.Marshal and decoded with
// layout.Unmarshal like the contract's.

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
//
// Producers inline is the old encoding, still read: states written now
// keep producers in ProducerKey keys and count them in ProducerKeys.
type PartitionState struct {
	LogStart     int64                   `json:"log_start"`
	End          int64                   `json:"end"`
	Epochs       []EpochStart            `json:"epochs,omitempty"`
	Producers    map[int64]ProducerState `json:"producers,omitempty"`
	ProducerKeys int                     `json:"producer_keys,omitempty"`
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
