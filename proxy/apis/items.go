package apis

import "slices"

// matcher finds the items of one sub-request answer by topic (or topic
// id) and partition. Brokers answer in request order, so the search
// starts where the last one ended and is linear overall.
type matcher struct {
	s   *splitter
	idx []int32
	pos int
}

func (s *splitter) matcher(si int) matcher { return matcher{s: s, idx: s.subs[si].idx} }

func (m *matcher) find(topic string, id [16]byte, byID bool, part int32) int32 {
	n := len(m.idx)
	for k := range n {
		j := (m.pos + k) % n
		i := m.idx[j]
		it := &m.s.items[i]
		if it.part != part || it.mark == m.s.seq || it.state != itemSent {
			continue
		}
		if (byID && it.id == id) || (!byID && it.topic == topic) {
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
func subset[T, P any](s *splitter, idx []int32, src []T, partsOf func(*T) *[]P, dst []T, scratch *[]P) []T {
	dst = dst[:0]
	if cap(*scratch) < len(idx) {
		*scratch = make([]P, 0, len(s.items))
	}
	ps := (*scratch)[:0]
	last, start := int32(-1), 0
	for _, i := range idx {
		it := &s.items[i]
		if it.ti != last {
			dst = append(dst, src[it.ti])
			last, start = it.ti, len(ps)
		}
		ps = append(ps, (*partsOf(&src[it.ti]))[it.pi])
		*partsOf(&dst[len(dst)-1]) = ps[start:len(ps):len(ps)]
	}
	*scratch = ps
	return dst
}

// countParts sizes the per-item state of a request with topics src.
func countParts[T, P any](src []T, partsOf func(*T) *[]P) int {
	n := 0
	for i := range src {
		n += len(*partsOf(&src[i]))
	}
	return n
}

// topicStarts fills dst with the number of each request topic's first item
// and, last, the number of items: items are numbered in the client's
// order, one per partition.
func topicStarts[T, P any](dst []int32, src []T, partsOf func(*T) *[]P) []int32 {
	dst = slices.Grow(dst[:0], len(src)+1)
	n := int32(0)
	for i := range src {
		dst = append(dst, n)
		n += int32(len(*partsOf(&src[i])))
	}
	return append(dst, n)
}
