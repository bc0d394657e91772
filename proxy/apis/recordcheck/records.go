// This file decodes the records of a magic-2 batch, as Kafka's
// DefaultRecord.readFrom does, without allocating: Records walks them and
// says where each part of each record lies.

package recordcheck

// minRecordBytes is the smallest record: a length, attributes, timestamp
// and offset deltas, key and value lengths and a header count, one byte
// each. No count above len/minRecordBytes can be honest.
const minRecordBytes = 7

// Span locates a key or value (a header's too) in the bytes Records walks:
// data[Off:Off+Len]; Len is -1 for null (Off is then where it would start).
type Span struct {
	Off, Len int
}

// Record is where one record's parts lie in the bytes Records walks.
// Start..End is the whole record, its length varint included; Attributes
// is the byte at Start plus the length varint's size.
type Record struct {
	Start, End     int
	TimestampDelta int64
	OffsetDelta    int32
	Key, Value     Span
	// Headers is where the header count varint starts; NumHeaders is its
	// value. The headers run from after that varint to End.
	Headers    int
	NumHeaders int32
}

// Records walks the records of one batch: the batch's bytes after its
// header (decompressed, for a compressed batch). Next checks each record as
// Kafka does and stops at the first fault, which Err then names.
type Records struct {
	data []byte
	pos  int
	err  Reason
}

// NewRecords walks data, the record bytes of one batch.
func NewRecords(data []byte) Records { return Records{data: data} }

// Err is why Next stopped early (None at the end of the data).
func (r *Records) Err() Reason { return r.err }

// Pos is where the next record starts (len of the data once all are read).
func (r *Records) Pos() int { return r.pos }

// Next decodes the record at the walk's position into rec and moves past
// it. It reports false at the end of the data, or (with Err set) when the
// record's lengths do not fit: a varint longer than 5 bytes (10 for the
// timestamp delta) or outside int32, a key, value or header that runs past
// the record, a negative header count or header key length, or a record
// whose fields do not use exactly its declared length.
func (r *Records) Next(rec *Record) bool { return r.next(rec, true) }

// next is Next over data that holds all the records (whole) or only their
// first bytes. Of a prefix, a record that does not lie whole in it is left
// for a later call, when more has arrived: next then reports false with
// Err None and Pos unchanged, as at the end of the data. A negative length
// is refused at once, since no later byte changes it; a length varint cut
// short or too long waits, since a prefix cannot tell which.
func (r *Records) next(rec *Record, whole bool) bool {
	if r.err != None || r.pos >= len(r.data) {
		return false
	}
	d, p := r.data, r.pos
	size, p, ok := varint(d, p)
	if !ok || size < 0 || int64(size) > int64(len(d)-p) {
		if !whole && (!ok || size >= 0) {
			return false // not here yet
		}
		return r.fail()
	}
	end := p + int(size)
	body := d[:end] // every field below must stay inside the record
	rec.Start, rec.End = r.pos, end
	if p >= end {
		return r.fail()
	}
	p++ // attributes: unused in magic 2
	var ts int64
	if ts, p, ok = varlong(body, p); !ok {
		return r.fail()
	}
	rec.TimestampDelta = ts
	var delta int32
	if delta, p, ok = varint(body, p); !ok {
		return r.fail()
	}
	rec.OffsetDelta = delta
	if rec.Key, p, ok = span(body, p); !ok {
		return r.fail()
	}
	if rec.Value, p, ok = span(body, p); !ok {
		return r.fail()
	}
	rec.Headers = p
	var n int32
	if n, p, ok = varint(body, p); !ok || n < 0 || int64(n)*2 > int64(end-p) {
		return r.fail() // each header takes at least two bytes (two lengths)
	}
	rec.NumHeaders = n
	for range n {
		var k Span
		if k, p, ok = span(body, p); !ok || k.Len < 0 {
			return r.fail() // Kafka: a header key is never null
		}
		if _, p, ok = span(body, p); !ok {
			return r.fail()
		}
	}
	if p != end {
		return r.fail() // Kafka: the record's size is not what its fields use
	}
	r.pos = end
	return true
}

func (r *Records) fail() bool {
	r.err = RecordBody
	return false
}

// span reads a length varint at p and skips that many bytes of b (none for
// -1, null); it returns where the bytes lie and the position after them.
func span(b []byte, p int) (Span, int, bool) {
	n, p, ok := varint(b, p)
	switch {
	case !ok || n < -1:
		return Span{}, p, false
	case n == -1:
		return Span{Off: p, Len: -1}, p, true
	case int64(n) > int64(len(b)-p):
		return Span{}, p, false
	}
	return Span{Off: p, Len: int(n)}, p + int(n), true
}

// varint reads a zig-zag varint of at most 5 bytes that fits an int32, as
// Kafka's ByteUtils.readVarint.
func varint(b []byte, p int) (int32, int, bool) {
	// The common cases: one byte (deltas), two (1 KiB records' lengths).
	if p < len(b) && b[p] < 0x80 {
		u := uint32(b[p])
		return int32(u>>1) ^ -int32(u&1), p + 1, true
	}
	if p+1 < len(b) && b[p+1] < 0x80 {
		u := uint32(b[p]&0x7f) | uint32(b[p+1])<<7
		return int32(u>>1) ^ -int32(u&1), p + 2, true
	}
	u, p, ok := uvarint(b, p)
	if !ok {
		return 0, p, false
	}
	return int32(u>>1) ^ -int32(u&1), p, true
}

// uvarint reads an unsigned varint of at most 5 bytes that fits a uint32;
// when it fails for want of bytes, the position returned is len(b).
func uvarint(b []byte, p int) (uint32, int, bool) {
	var u uint64
	for i := 0; i < 5; i++ {
		if p >= len(b) {
			return 0, p, false
		}
		c := b[p]
		p++
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if u > 0xffffffff {
				return 0, p, false
			}
			return uint32(u), p, true
		}
	}
	return 0, p, false
}

// varlong reads a zig-zag varint of at most 10 bytes, as Kafka's
// ByteUtils.readVarlong.
func varlong(b []byte, p int) (int64, int, bool) {
	if p < len(b) && b[p] < 0x80 { // the common case: a timestamp delta under 64 ms
		u := uint64(b[p])
		return int64(u>>1) ^ -int64(u&1), p + 1, true
	}
	var u uint64
	for i := 0; i < 10; i++ {
		if p >= len(b) {
			return 0, p, false
		}
		c := b[p]
		p++
		if i == 9 && c > 1 {
			return 0, p, false // past 64 bits
		}
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), p, true
		}
	}
	return 0, p, false
}

// walk checks that data holds exactly count records whose offset deltas
// run 0..count-1, as Kafka's record iterator reads them (count must be
// positive; the batch header's own checks come first).
func walk(data []byte, count int32) Reason {
	w := newWalker(count, len(data))
	w.advance(data)
	return w.res
}

// walker is walk over bytes that are still arriving: advance, given the
// first bytes of the data, checks every record that lies whole in them and
// stops before the first that does not. A record that lies whole in a
// prefix reads there exactly as in the whole data (each field is bounded
// by the record's own length), so the verdict is walk's for any sequence
// of growing prefixes; walk itself is the one call with all the data.
type walker struct {
	count, i int32 // records claimed, and checked so far
	pos      int   // where record i starts
	total    int   // the data's length, all of it
	res      Reason
	done     bool
}

func newWalker(count int32, total int) walker {
	w := walker{count: count, total: total}
	if int64(count) > int64(total/minRecordBytes) {
		w.res, w.done = RecordsCount, true // more records claimed than the bytes could hold
	}
	return w
}

// advance walks on through d, the data's first len(d) bytes (at most
// total, and never fewer than the call before).
func (w *walker) advance(d []byte) {
	if w.done {
		return
	}
	whole := len(d) >= w.total
	r := Records{data: d, pos: w.pos}
	var rec Record
	for ; w.i < w.count; w.i++ {
		if !r.next(&rec, whole) {
			if !whole && r.err == None {
				w.pos = r.pos // record i has not arrived whole yet
				return
			}
			w.res, w.done = RecordsCount, true // Kafka: premature EOF
			if r.err != None {
				w.res = r.err
			}
			return
		}
		if rec.OffsetDelta != w.i {
			w.res, w.done = OffsetDeltas, true
			return
		}
	}
	if r.pos != w.total {
		w.res = RecordsCount // Kafka: records still remaining
	}
	w.done = true
}
