package kafscale

import (
	"crypto/sha1"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/routing"
)

// keyKind is what a key under the prefix holds.
type keyKind uint8

const (
	kindOther     keyKind = iota // not routing's business (offsets, configs, ...)
	kindPartition                // partition-leases/<topic>/<p>
	kindGroup                    // group-leases/<group>
	kindSnapshot                 // metadata/snapshot
)

func (k keyKind) String() string {
	switch k {
	case kindPartition:
		return "owner"
	case kindGroup:
		return "coordinator"
	case kindSnapshot:
		return "snapshot"
	}
	return "other"
}

// keys parses KafScale's key names under one root.
type keys struct {
	root       string // prefix with one trailing slash
	partitions string
	groups     string
	snapshot   string
}

func newKeys(prefix string) keys {
	root := strings.TrimRight(prefix, "/") + "/"
	return keys{root: root, partitions: root + "partition-leases/", groups: root + "group-leases/", snapshot: root + "metadata/snapshot"}
}

// watchRange is the one etcd key range that holds every key routing
// reads: group-leases/ < metadata/snapshot < partition-leases/ in byte
// order, so [group-leases/, the end of partition-leases/) covers them.
// KafScale writes nothing else in it: assignments/, brokers/ and
// consumers/ sort before it, topics/ (with next_offset) after it. A key
// that does land in it is received, counted as "other" and dropped.
func (k keys) watchRange() (start, end string) {
	return k.groups, clientv3.GetPrefixRangeEnd(k.partitions)
}

// key is a parsed key.
type key struct {
	kind  keyKind
	topic string // kindPartition
	part  int32  // kindPartition
	group string // kindGroup
}

// parse names the key. Topic names cannot hold '/' (Kafka allows only
// [a-zA-Z0-9._-]); group names can, so a group is the whole rest.
func (k keys) parse(s string) (key, error) {
	switch {
	case s == k.snapshot:
		return key{kind: kindSnapshot}, nil
	case strings.HasPrefix(s, k.groups):
		g := s[len(k.groups):]
		if g == "" {
			return key{kind: kindGroup}, errors.New("group lease key without a group")
		}
		return key{kind: kindGroup, group: g}, nil
	case strings.HasPrefix(s, k.partitions):
		rest := s[len(k.partitions):]
		i := strings.LastIndexByte(rest, '/')
		if i <= 0 {
			return key{kind: kindPartition}, errors.New("partition lease key without topic/partition")
		}
		p, err := strconv.ParseInt(rest[i+1:], 10, 32)
		if err != nil || p < 0 {
			return key{kind: kindPartition}, fmt.Errorf("partition %q is not a partition number", rest[i+1:])
		}
		return key{kind: kindPartition, topic: rest[:i], part: int32(p)}, nil
	}
	return key{}, nil
}

// parseOwner reads a lease value: the owner's broker id as a decimal string.
func parseOwner(v []byte) (int32, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 32)
	if err != nil || id < 0 {
		return -1, fmt.Errorf("owner %q is not a broker id", v)
	}
	return int32(id), nil
}

// epochOf derives a leader epoch from a lease key's modification revision.
// KafScale writes a lease key once per acquisition (create if absent), so a
// later owner's key always has a higher revision: epochs grow across owner
// changes, are the same on every proxy replica, and survive restarts and
// re-lists. int32 holds revisions up to 2^31-1; beyond, the epoch stays at
// the maximum (it never goes backwards, but stops growing).
func epochOf(modRevision int64) int32 {
	return int32(min(max(modRevision, 0), math.MaxInt32))
}

// snapshot is what routing takes from metadata/snapshot.
type snapshot struct {
	brokers map[int32]routing.Broker
	topics  map[string]routing.Topic
}

func emptySnapshot() snapshot {
	return snapshot{brokers: map[int32]routing.Broker{}, topics: map[string]routing.Topic{}}
}

// snapshotJSON is the part of kmsg.MetadataResponse, as encoding/json
// writes it (Go field names), that routing needs.
type snapshotJSON struct {
	Brokers []struct {
		NodeID int32
		Host   string
		Port   int32
		Rack   *string
	}
	Topics []struct {
		Topic      *string
		TopicID    [16]byte
		Partitions []struct{ Partition int32 }
	}
}

// decodeSnapshot parses the snapshot. A malformed document is an error
// (the caller keeps the previous one); a bad entry in a good document is
// skipped and reported in skipped.
func decodeSnapshot(v []byte) (snapshot, []error, error) {
	var doc snapshotJSON
	if err := json.Unmarshal(v, &doc); err != nil {
		return snapshot{}, nil, fmt.Errorf("metadata snapshot: %w", err)
	}
	s, skipped := emptySnapshot(), []error(nil)
	for _, b := range doc.Brokers {
		switch {
		case b.NodeID < 0 || b.Host == "" || b.Port <= 0 || b.Port > math.MaxUint16:
			skipped = append(skipped, fmt.Errorf("broker %d at %q port %d: bad id or address", b.NodeID, b.Host, b.Port))
			continue
		case s.brokers[b.NodeID].Addr != "":
			skipped = append(skipped, fmt.Errorf("broker %d listed twice", b.NodeID))
			continue
		}
		br := routing.Broker{ID: b.NodeID, Addr: net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))}
		if b.Rack != nil {
			br.Rack = *b.Rack
		}
		s.brokers[b.NodeID] = br
	}
	for _, t := range doc.Topics {
		if t.Topic == nil || *t.Topic == "" {
			skipped = append(skipped, errors.New("topic without a name"))
			continue
		}
		n := int32(len(t.Partitions))
		for _, p := range t.Partitions {
			n = max(n, p.Partition+1) // partitions listed sparsely stay routable
		}
		if n > routing.MaxPartitions {
			skipped = append(skipped, fmt.Errorf("topic %s: %d partitions, more than %d", *t.Topic, n, routing.MaxPartitions))
			continue
		}
		tp := routing.Topic{Name: *t.Topic, ID: t.TopicID, Partitions: n}
		if tp.ID == ([16]byte{}) {
			tp.ID = TopicID(tp.Name)
		}
		s.topics[tp.Name] = tp
	}
	return s, skipped, nil
}

// TopicID is KafScale's topic id: the first 16 bytes of the SHA-1 of the
// name. The snapshot carries it; it is computed only for a snapshot entry
// without one, so that clients using topic ids still reach the topic.
func TopicID(name string) [16]byte {
	sum := sha1.Sum([]byte(name))
	var id [16]byte
	copy(id[:], sum[:])
	return id
}
