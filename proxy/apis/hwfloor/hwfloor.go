// Package hwfloor keeps, for each partition, the highest high watermark the
// proxy has passed on to a client, and raises lower ones to it.
//
// Why: with zone reads (routing.RouteRead) a partition is read at a broker
// that does not own it and learns of the owner's commits through its etcd
// watch, so its high watermark trails the owner's by the watch's lag, as a
// Kafka follower's does under KIP-392. While a client's fetches of a
// partition stay on one broker that is harmless (a broker's view only
// grows), but when they move (a broker of the zone died, paused or joined,
// or the zone fell back to the owner) the client would see the high
// watermark go down. A floor is a watermark some broker reported for a
// committed log, so an answer raised to it never reports beyond the
// committed end; the records in the answer are the broker's, unchanged.
//
// Limits: floors are per proxy process. A client that reconnects to
// another proxy replica whose route for the partition differs may see a
// lower watermark, by at most the watch's lag. Partitions are known by
// topic id and number: a topic recreated under the same name has a new id
// and starts without floors, and topics without an id (the zero id) get
// none. Memory is 8 bytes a partition, up to the highest partition of each
// topic fetched through the proxy (in chunks of 64); a topic's floors are
// dropped when a new topic is added after it is gone.
//
// Raises are lock-free and allocation-free once a partition has a floor;
// adding a topic (which copies the map of topics, as the routing table
// does) or a chunk of 64 partitions happens under a mutex that only those
// additions take.
package hwfloor

import (
	"sync"
	"sync/atomic"
)

// maxPartition bounds the floors a topic gets (the routing table's bound,
// layout.MaxPartitions, is checked before a partition is routed; this is a
// second guard against a corrupt partition number).
const maxPartition = 1 << 20

// Floors is the set of floors. The zero value is not usable: use New.
type Floors struct {
	live   func(id [16]byte) bool
	topics atomic.Pointer[map[[16]byte]*topic]
	mu     sync.Mutex // serializes adding topics and growing them
}

// topic's floors are in chunks, so that growing a topic copies chunk
// pointers and never moves a cell that a raise may be writing.
type topic struct {
	chunks atomic.Pointer[[]*chunk]
}

const chunkLen = 64

type chunk [chunkLen]atomic.Int64

// New returns empty floors. live says whether a topic id still exists; the
// floors of topics that are gone are dropped when a topic is added.
func New(live func(id [16]byte) bool) *Floors {
	f := &Floors{live: live}
	m := map[[16]byte]*topic{}
	f.topics.Store(&m)
	return f
}

// Raise records that a broker reported hwm for partition part of topic id
// and returns the high watermark to pass on: hwm, or the higher floor.
// A negative hwm (an answer with an error) is returned as is.
func (f *Floors) Raise(id [16]byte, part int32, hwm int64) int64 {
	if hwm < 0 || part < 0 || part >= maxPartition || id == ([16]byte{}) {
		return hwm
	}
	c := f.cell(id, part)
	for {
		cur := c.Load()
		if hwm <= cur {
			return cur
		}
		if c.CompareAndSwap(cur, hwm) {
			return hwm
		}
	}
}

// Floor is the highest high watermark passed on for partition part of
// topic id, or -1 when none was.
func (f *Floors) Floor(id [16]byte, part int32) int64 {
	if part < 0 || part >= maxPartition || id == ([16]byte{}) {
		return -1
	}
	t := (*f.topics.Load())[id]
	if t == nil {
		return -1
	}
	cs := *t.chunks.Load()
	if ci := int(part) / chunkLen; ci < len(cs) {
		if v := cs[ci][int(part)%chunkLen].Load(); v > 0 {
			return v
		}
	}
	return -1
}

// cell returns the floor of one partition, adding it when it is new.
func (f *Floors) cell(id [16]byte, part int32) *atomic.Int64 {
	ci, i := int(part)/chunkLen, int(part)%chunkLen
	if t := (*f.topics.Load())[id]; t != nil {
		if cs := *t.chunks.Load(); ci < len(cs) {
			return &cs[ci][i]
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m := *f.topics.Load()
	t := m[id]
	if t == nil {
		next := make(map[[16]byte]*topic, len(m)+1)
		for k, v := range m {
			if f.live == nil || f.live(k) {
				next[k] = v
			}
		}
		t = &topic{}
		t.chunks.Store(&[]*chunk{})
		next[id] = t
		f.topics.Store(&next)
	}
	cs := *t.chunks.Load()
	if ci >= len(cs) {
		grown := make([]*chunk, ci+1)
		copy(grown, cs)
		for j := len(cs); j < len(grown); j++ {
			grown[j] = new(chunk)
		}
		t.chunks.Store(&grown)
		cs = grown
	}
	return &cs[ci][i]
}

// Len is the number of topics with floors (for tests).
func (f *Floors) Len() int { return len(*f.topics.Load()) }
