package partlog

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/kproxy/kproxy/internal/kwire"
)

// Read returns whole committed batches of snap starting with the one that
// holds offset, up to maxBytes (the first batch even if larger, when
// atLeastOne). Batches are returned exactly as stored; when they come from
// one object the result aliases it (objects are immutable: do not modify).
// An offset in a part of the log whose segment this broker has not learned
// yet reads as empty.
func Read(ctx context.Context, objs Objects, snap *Snapshot, offset int64, maxBytes int, atLeastOne bool) ([]byte, error) {
	end := snap.State.End
	i := snap.Find(offset)
	if i < 0 || offset >= end {
		return nil, nil
	}
	var parts [][]byte // one contiguous range per segment object
	total := 0
	next := snap.Segments[i].Base
	for ; i < len(snap.Segments); i++ {
		seg := snap.Segments[i]
		if seg.Base != next || seg.Base >= end {
			break // a gap: wait until the view learns the missing segment
		}
		next = seg.Last + 1
		data, err := objs.Get(ctx, seg.Object)
		if err != nil {
			return join(parts, total), fmt.Errorf("read segment %s: %w", seg.Object, err)
		}
		from, to, full := -1, 0, false
		pos := 0
		err = ScanBatches(data, func(b StoredBatch) bool {
			defer func() { pos += len(b.Raw) }()
			if b.LastOffset < offset {
				return true
			}
			if b.BaseOffset >= end {
				return false
			}
			if total+len(b.Raw) > maxBytes && !(atLeastOne && total == 0) {
				full = true
				return false
			}
			if from < 0 {
				from = pos
			}
			to = pos + len(b.Raw)
			total += len(b.Raw)
			return true
		})
		if from >= 0 {
			parts = append(parts, data[from:to])
		}
		if err != nil {
			return join(parts, total), fmt.Errorf("segment %s: %w", seg.Object, err)
		}
		if full || total >= maxBytes {
			break
		}
	}
	return join(parts, total), nil
}

// join returns the single part as is, or a copy of all parts.
func join(parts [][]byte, total int) []byte {
	switch len(parts) {
	case 0:
		return nil
	case 1:
		return parts[0]
	}
	out := make([]byte, 0, total)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Timestamped is an offset found by timestamp.
type Timestamped struct {
	Offset    int64
	Timestamp int64
}

// ByTimestamp finds the first committed record with a timestamp >= ts
// (Kafka's ListOffsets by time); ok false when there is none. Compressed
// batches are answered at batch granularity (their first offset).
func ByTimestamp(ctx context.Context, objs Objects, snap *Snapshot, ts int64) (Timestamped, bool, error) {
	for _, seg := range snap.Segments {
		if seg.MaxTimestamp < ts || seg.Last < snap.State.LogStart {
			continue
		}
		data, err := objs.Get(ctx, seg.Object)
		if err != nil {
			return Timestamped{}, false, fmt.Errorf("read segment %s: %w", seg.Object, err)
		}
		var found Timestamped
		ok := false
		err = ScanBatches(data, func(b StoredBatch) bool {
			if b.MaxTimestamp < ts || b.LastOffset < snap.State.LogStart || b.BaseOffset >= snap.State.End {
				return b.BaseOffset < snap.State.End
			}
			found, ok = Timestamped{Offset: max(b.BaseOffset, snap.State.LogStart), Timestamp: b.MaxTimestamp}, true
			eachRecord(b, func(off, rts int64) bool {
				if rts >= ts && off >= snap.State.LogStart {
					found = Timestamped{Offset: off, Timestamp: rts}
					return false
				}
				return true
			})
			return false
		})
		if err != nil {
			return Timestamped{}, false, fmt.Errorf("segment %s: %w", seg.Object, err)
		}
		if ok {
			return found, true, nil
		}
	}
	return Timestamped{}, false, nil
}

// MaxTimestamp finds the committed record with the largest timestamp (the
// first one on ties); ok false for an empty log.
func MaxTimestamp(ctx context.Context, objs Objects, snap *Snapshot) (Timestamped, bool, error) {
	best, bi := int64(-1), -1
	for i, seg := range snap.Segments {
		if seg.Last >= snap.State.LogStart && seg.Base < snap.State.End && seg.MaxTimestamp > best {
			best, bi = seg.MaxTimestamp, i
		}
	}
	if bi < 0 {
		return Timestamped{}, false, nil
	}
	one := *snap
	one.Segments = snap.Segments[bi : bi+1]
	return ByTimestamp(ctx, objs, &one, best)
}

// eachRecord calls fn with the offset and timestamp of each record of an
// uncompressed batch; compressed batches are skipped.
func eachRecord(b StoredBatch, fn func(offset, ts int64) bool) {
	if b.Attributes&kwire.BatchAttrCodec != 0 {
		return
	}
	h := headerOf(b.Raw)
	rest := b.Raw[kwire.BatchHeaderLen:]
	for n := int32(0); n < h.NumRecords && len(rest) > 0; n++ {
		length, k := binary.Varint(rest)
		if k <= 0 || length < 0 || int64(len(rest)-k) < length {
			return
		}
		rec := rest[k : k+int(length)]
		rest = rest[k+int(length):]
		if len(rec) < 1 {
			return
		}
		tsDelta, k1 := binary.Varint(rec[1:])
		if k1 <= 0 {
			return
		}
		offDelta, k2 := binary.Varint(rec[1+k1:])
		if k2 <= 0 {
			return
		}
		if !fn(b.BaseOffset+offDelta, h.FirstTimestamp+tsDelta) {
			return
		}
	}
}
