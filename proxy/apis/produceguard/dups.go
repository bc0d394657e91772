package produceguard

// This file finds the partitions a Produce lists more than once. Kafka's
// KafkaApis collects a request's partitions in a map, so the last listing's
// records are appended, once, and the answer names the partition once:
// the earlier listings are neither forwarded nor answered.

import "slices"

// Key names one listing: a topic by name (id zero) or by id (v13+), and a
// partition.
type Key struct {
	Topic string
	ID    [16]byte
	Part  int32
}

// quadratic is the most listings compared pairwise; more use a map, built
// only for a request that large.
const quadratic = 32

// Dups is the scratch of one request's duplicate search, reused.
type Dups struct {
	keys    []Key
	dropped []bool
	n       int
}

// Reset empties d for a request.
func (d *Dups) Reset() {
	clear(d.keys)
	d.keys, d.n = d.keys[:0], 0
}

// Add appends the next listing's key, in request order.
func (d *Dups) Add(k Key) { d.keys = append(d.keys, k) }

// Mark finds the listings whose key comes again later and returns how
// many there are.
func (d *Dups) Mark() int {
	n := len(d.keys)
	d.dropped = slices.Grow(d.dropped[:0], n)[:n]
	clear(d.dropped)
	d.n = 0
	if n < 2 {
		return 0
	}
	if n <= quadratic {
		for i := range d.keys {
			if slices.Contains(d.keys[i+1:], d.keys[i]) {
				d.dropped[i] = true
				d.n++
			}
		}
		return d.n
	}
	last := make(map[Key]int, n)
	for i, k := range d.keys {
		last[k] = i
	}
	for i, k := range d.keys {
		if last[k] != i {
			d.dropped[i] = true
			d.n++
		}
	}
	return d.n
}

// Count is what the last Mark returned.
func (d *Dups) Count() int { return d.n }

// Dropped reports whether listing i is listed again later (after Mark).
func (d *Dups) Dropped(i int) bool { return d.n > 0 && d.dropped[i] }
