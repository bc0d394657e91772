package crypt

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/kproxy/kproxy/internal/kcodec"
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
//
// Encrypted records are framed as LZ4 with their blocks stored, not
// compressed, when their batch came as lz4 (kcodec.Encoders.StoredLZ4):
// the batch keeps its codec and every client reads the frame, but
// ciphertext does not compress, and lz4's search over it costs ten times
// more than over random bytes, because the envelope header that recurs in
// every record keeps resetting its skipping (1 KiB records: 325 MB/s
// against 3.5 GB/s). Fetch answers, whose values are plaintext again, are
// compressed for real.

// recordsFunc appends the rewritten form of the n records in recs to dst;
// changed is false when it left every record as it was.
type recordsFunc func(dst, recs []byte, n int) (out []byte, changed bool, err error)

// scratch holds decompressed and rewritten records between batches, and
// the shares of the codecs' budget that cover them while a set is
// rewritten.
type scratch struct {
	plain, out   []byte
	gPlain, gOut kcodec.Grant
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxScratch is the largest scratch buffer kept for reuse.
const maxScratch = 8 << 20

// rewriteSet appends set's batches, each rewritten by fn, to dst. On
// produce (encrypting), a trailing partial batch is an error and lz4
// blocks are stored; on fetch, a trailing partial batch (a fetch cut short
// by its size limit) is left out. checked, if not nil, is set's first batch
// as produce validation read it (see checkedData).
func (c *codecs) rewriteSet(dst, set []byte, encrypting bool, checked *recordcheck.Batch, fn recordsFunc) ([]byte, error) {
	dropPartial := !encrypting
	sc := scratchPool.Get().(*scratch)
	sc.gPlain.Budget, sc.gOut.Budget = c.budget, c.budget
	defer func() {
		sc.gPlain.Release()
		sc.gOut.Release()
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
		if dst, err = c.rewriteBatch(dst, b, sc, encrypting, checkedData(checked, b), fn); err != nil {
			return nil, err
		}
		checked = nil
	}
	return dst, nil
}

func partial(dst []byte, drop bool) ([]byte, error) {
	if drop {
		return dst, nil
	}
	return nil, fmt.Errorf("%w: partial batch", ErrFormat)
}

// checkedData is the records of batch b that checked holds, or nil when it
// holds none of b's: produce validation at level Full checked b's CRC and
// decompressed its records, which are then rewritten as they are instead
// of being decompressed again. A Batch counts for b only if its header is
// b's own bytes (the same memory), so a Batch of other data is never used.
func checkedData(checked *recordcheck.Batch, b []byte) []byte {
	if checked == nil || checked.Data == nil || len(checked.Header) != kwire.BatchHeaderLen ||
		len(b) < kwire.BatchHeaderLen || &checked.Header[0] != &b[0] {
		return nil
	}
	return checked.Data
}

// rewriteBatch appends one whole batch b, rewritten by fn, to dst; checked,
// if not nil, is its records as validation read them (checkedData).
func (c *codecs) rewriteBatch(dst, b []byte, sc *scratch, encrypting bool, checked []byte, fn recordsFunc) ([]byte, error) {
	if b[kwire.BatchOffMagic] != 2 {
		if encrypting { // a legacy message set would be stored in plaintext
			return nil, fmt.Errorf("%w: a magic %d message set cannot be encrypted", ErrFormat, b[kwire.BatchOffMagic])
		}
		return append(dst, b...), nil
	}
	if len(b) < kwire.BatchHeaderLen {
		return nil, fmt.Errorf("%w: batch of %d bytes", ErrFormat, len(b))
	}
	if checked == nil && binary.BigEndian.Uint32(b[kwire.BatchOffCRC:]) != kwire.BatchCRC(b) {
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
		plain := checked
		if plain == nil {
			if sc.plain, err = c.decompress(sc.plain[:0], b[kwire.BatchHeaderLen:], codec, &sc.gPlain); err != nil {
				return nil, err
			}
			plain = sc.plain
			c.count.decompressed(encrypting)
		}
		// The rewritten records are the same records, give or take each
		// one's envelope: covered before fn for their size, after it for
		// what the envelopes added.
		if err = sc.gOut.Reserve(max(cap(sc.out), len(plain))); err != nil {
			return nil, errBusy
		}
		if sc.out, changed, err = fn(sc.out[:0], plain, n); err == nil && sc.gOut.Reserve(cap(sc.out)) != nil {
			err = errBusy
		}
		if err == nil && changed {
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
