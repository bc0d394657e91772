package split

import "slices"

// Matcher finds the items of one sub-request answer by topic (or topic
// id) and partition. Brokers answer in request order, so the search
// starts where the last one ended and is linear overall.
type Matcher struct {
	s   *Engine
	idx []int32
	pos int
}

func (s *Engine) Matcher(si int) Matcher { return Matcher{s: s, idx: s.subs[si].idx} }

func (m *Matcher) Find(topic string, id [16]byte, byID bool, part int32) int32 {
	n := len(m.idx)
	for k := range n {
		j := (m.pos + k) % n
		i := m.idx[j]
		it := &m.s.items[i]
		if it.Part != part || it.mark == m.s.seq || it.state != itemSent {
			continue
		}
		if (byID && it.ID == id) || (!byID && it.Topic == topic) {
			m.pos = j + 1
			return i
		}
	}
	return -1
}

// subset fills dst with the topics of a sub-request holding items idx:
// each run of items from one request topic becomes a copy of that topic
// whose partitions are the picked ones. Partition values (and the record
// bytes they point to) are shared with src, not copied; scratch is reused
// across calls.
func Subset[T, P any](s *Engine, idx []int32, src []T, partsOf func(*T) *[]P, dst []T, scratch *[]P) []T {
	dst = dst[:0]
	if cap(*scratch) < len(idx) {
		*scratch = make([]P, 0, len(s.items))
	}
	ps := (*scratch)[:0]
	last, start := int32(-1), 0
	for _, i := range idx {
		it := &s.items[i]
		if it.TI != last {
			dst = append(dst, src[it.TI])
			last, start = it.TI, len(ps)
		}
		ps = append(ps, (*partsOf(&src[it.TI]))[it.PI])
		*partsOf(&dst[len(dst)-1]) = ps[start:len(ps):len(ps)]
	}
	*scratch = ps
	return dst
}

// countParts sizes the per-item state of a request with topics src.
func CountParts[T, P any](src []T, partsOf func(*T) *[]P) int {
	n := 0
	for i := range src {
		n += len(*partsOf(&src[i]))
	}
	return n
}

// topicStarts fills dst with the number of each request topic's first item
// and, last, the number of items: items are numbered in the client's
// order, one per partition.
func TopicStarts[T, P any](dst []int32, src []T, partsOf func(*T) *[]P) []int32 {
	dst = slices.Grow(dst[:0], len(src)+1)
	n := int32(0)
	for i := range src {
		dst = append(dst, n)
		n += int32(len(*partsOf(&src[i])))
	}
	return append(dst, n)
}
