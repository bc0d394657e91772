// Package layout is the etcd contract between Kafka-protocol brokers and the
// proxies that route to them (docs/etcd-layout.md explains it in prose): the
// meta keys (brokers, topics, partition owners and epochs, group
// coordinators and their epochs), their values, their decoding (Decode), and
// the rendezvous choice of a broker for a partition or group nobody owns
// (Rendezvous), and the one ApiVersions feature a broker lists for proxies
// (UnorderedResponsesFeature). Brokers write every meta key; proxies only read and watch
// MetaPrefix. Proxies, the lease kit and brokers all import this package, and
// it imports nothing of theirs.
//
// Its limit: it says nothing about a broker's own storage. Keys that change
// on every commit (a log's state, segments, group offsets) are each broker's
// business; they must live outside MetaPrefix so that no proxy receives a
// watch event per produce (the stub broker's are in refbroker/broker/schema).
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
)

// Key is a parsed key. Only the fields that the kind uses are set.
type Key struct {
	Kind      Kind
	Broker    int32
	Topic     string
	Partition int32
	Group     string
}

// Parse reads a key under MetaPrefix. Other keys give KindUnknown.
func (l Layout) Parse(key string) Key {
	if rest, ok := strings.CutPrefix(key, l.MetaPrefix()); ok {
		return parseMeta(rest)
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

// Marshal encodes a value for etcd.
func Marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Values are plain data; failure here is a programming error.
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
