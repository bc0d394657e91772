package crypt

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
)

// This file rewrites the record data of one partition batch by batch: it
// decompresses a batch's records if need be, has a function rewrite them
// into a new buffer (one pass), recompresses them with the batch's own
// codec and fixes the batch's length and CRC-32C. Everything else in the
// header (base offset, epochs, timestamps, producer id, epoch and
// sequence, attributes) is kept. Control batches are copied as they are;
// legacy message sets (magic 0 and 1) too on fetch, and are refused on
// produce, where they would be stored in plaintext.

// recordsFunc appends the rewritten form of the n records in recs to dst;
// changed is false when it left every record as it was.
type recordsFunc func(dst, recs []byte, n int) (out []byte, changed bool, err error)

// scratch holds decompressed and rewritten records between batches.
type scratch struct{ plain, out []byte }

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxScratch is the largest scratch buffer kept for reuse.
const maxScratch = 8 << 20

// rewriteSet appends set's batches, each rewritten by fn, to dst. On
// produce (encrypting), a trailing partial batch is an error and lz4
// blocks are stored (lz4stored.go); on fetch, a trailing partial batch (a
// fetch cut short by its size limit) is left out.
func (c *codecs) rewriteSet(dst, set []byte, encrypting bool, fn recordsFunc) ([]byte, error) {
	dropPartial := !encrypting
	sc := scratchPool.Get().(*scratch)
	defer func() {
		if cap(sc.plain) <= maxScratch && cap(sc.out) <= maxScratch {
			scratchPool.Put(sc)
		}
	}()
	for len(set) > 0 {
		if len(set) < kwire.BatchLogOverhead {
			return partial(dst, dropPartial)
		}
		total := int64(int32(binary.BigEndian.Uint32(set[kwire.BatchOffLength:]))) + kwire.BatchLogOverhead
		if total < kwire.BatchLogOverhead+5 || total > int64(len(set)) {
			if total > int64(len(set)) {
				return partial(dst, dropPartial)
			}
			return nil, fmt.Errorf("%w: batch length %d", ErrFormat, total)
		}
		b := set[:total]
		set = set[total:]
		var err error
		if dst, err = c.rewriteBatch(dst, b, sc, encrypting, fn); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

func partial(dst []byte, drop bool) ([]byte, error) {
	if drop {
		return dst, nil
	}
	return nil, fmt.Errorf("%w: partial batch", ErrFormat)
}

// rewriteBatch appends one whole batch b, rewritten by fn, to dst.
func (c *codecs) rewriteBatch(dst, b []byte, sc *scratch, encrypting bool, fn recordsFunc) ([]byte, error) {
	if b[kwire.BatchOffMagic] != 2 {
		if encrypting { // a legacy message set would be stored in plaintext
			return nil, fmt.Errorf("%w: a magic %d message set cannot be encrypted", ErrFormat, b[kwire.BatchOffMagic])
		}
		return append(dst, b...), nil
	}
	if len(b) < kwire.BatchHeaderLen {
		return nil, fmt.Errorf("%w: batch of %d bytes", ErrFormat, len(b))
	}
	if binary.BigEndian.Uint32(b[kwire.BatchOffCRC:]) != kwire.BatchCRC(b) {
		return nil, fmt.Errorf("%w: batch CRC-32C mismatch", ErrAuth)
	}
	attrs := binary.BigEndian.Uint16(b[kwire.BatchOffAttributes:])
	if attrs&kwire.BatchAttrControl != 0 {
		return append(dst, b...), nil
	}
	n := int(int32(binary.BigEndian.Uint32(b[kwire.BatchOffNumRecords:])))
	if n < 0 {
		return nil, fmt.Errorf("%w: %d records", ErrFormat, n)
	}
	codec := int8(attrs & kwire.BatchAttrCodec)
	start := len(dst)
	dst = append(dst, b[:kwire.BatchHeaderLen]...)
	var changed bool
	var err error
	if codec == codecNone {
		dst, changed, err = fn(dst, b[kwire.BatchHeaderLen:], n)
	} else {
		if sc.plain, err = c.decompress(sc.plain[:0], b[kwire.BatchHeaderLen:], codec); err != nil {
			return nil, err
		}
		if sc.out, changed, err = fn(sc.out[:0], sc.plain, n); err == nil && changed {
			dst, err = c.compress(dst, sc.out, codec, encrypting) // lz4: stored blocks
		}
	}
	if err != nil {
		return nil, err
	}
	if !changed {
		return append(dst[:start], b...), nil
	}
	nb := dst[start:]
	binary.BigEndian.PutUint32(nb[kwire.BatchOffLength:], uint32(len(nb)-kwire.BatchLogOverhead))
	binary.BigEndian.PutUint32(nb[kwire.BatchOffCRC:], kwire.BatchCRC(nb))
	return dst, nil
}

// eachRecord calls f on each of the n records of recs, which must hold
// exactly them, with the bytes from the record on.
func eachRecord(recs []byte, n int, f func(raw []byte, r record) error) error {
	it := recordcheck.NewRecords(recs)
	var w recordcheck.Record
	for i := range n {
		if !it.Next(&w) {
			return fmt.Errorf("%w: record %d of %d: %s", ErrFormat, i, n, it.Err())
		}
		if err := f(recs[w.Start:], fromWalk(recs, &w)); err != nil { // by value: a pointer would escape to the heap
			return fmt.Errorf("record %d: %w", i, err)
		}
	}
	if it.Pos() != len(recs) {
		return fmt.Errorf("%w: %d bytes after the batch's %d records", ErrFormat, len(recs)-it.Pos(), n)
	}
	return nil
}
