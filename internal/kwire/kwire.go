// Package kwire is the one home of Kafka framing in this repository, for
// the proxy, its upstream pool, the stub broker and tests: reading and
// writing size-prefixed frames, request and response headers, skipping
// tagged fields, which request versions use the flexible (KIP-482) header,
// and a pool of frame buffers. It decodes no message bodies; that is kmsg's
// job.
package kwire

import "github.com/twmb/franz-go/pkg/kmsg"

// maxKey bounds the table; kmsg's keys are dense and far below it.
const maxKey = 255

// FlexTable answers, without allocating, whether a request version uses the
// flexible header. Build it once with NewFlexTable so that hot paths never
// call kmsg.RequestForKey.
type FlexTable [][]bool

// NewFlexTable builds the table from every request kmsg knows.
func NewFlexTable() FlexTable {
	t := make(FlexTable, maxKey+1)
	for key := range t {
		req := kmsg.RequestForKey(int16(key))
		if req == nil {
			continue
		}
		vs := make([]bool, req.MaxVersion()+1)
		for v := range vs {
			req.SetVersion(int16(v))
			vs[v] = req.IsFlexible()
		}
		t[key] = vs
	}
	return t
}

// Lookup reports whether key/version is flexible and whether kmsg knows it.
func (t FlexTable) Lookup(key, version int16) (flexible, known bool) {
	if key < 0 || int(key) >= len(t) || version < 0 || int(version) >= len(t[key]) {
		return false, false
	}
	return t[key][version], true
}
