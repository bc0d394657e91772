package partlog

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

const (
	// keptBatches is how many recent batches per producer Kafka remembers.
	keptBatches = 5
	// producerExpiry drops idle producers, like producer.id.expiration.ms.
	producerExpiry = 24 * time.Hour
	// maxProducers bounds the producers one partition remembers (about 400
	// bytes each, in memory and in their own etcd keys; a commit rewrites
	// only the ones it changed).
	maxProducers = 1000
)

// producerTable is the idempotent-producer state of a group commit being
// built: the committed table, copied on the first change.
type producerTable struct {
	src     map[int64]schema.ProducerState
	cur     map[int64]schema.ProducerState
	copied  bool
	touched map[int64]bool // ids set since src
}

func (t *producerTable) get(id int64) (schema.ProducerState, bool) {
	m := t.src
	if t.copied {
		m = t.cur
	}
	ps, ok := m[id]
	return ps, ok
}

func (t *producerTable) set(id int64, ps schema.ProducerState) {
	if !t.copied {
		t.cur = maps.Clone(t.src)
		if t.cur == nil {
			t.cur = make(map[int64]schema.ProducerState)
		}
		t.copied = true
		t.touched = make(map[int64]bool)
	}
	t.cur[id] = ps
	t.touched[id] = true
}

// changes is what the commit of final (result's answer) must write: the
// producers whose state changed and those dropped since src.
func (t *producerTable) changes(final map[int64]schema.ProducerState) (put, del []int64) {
	for id := range t.touched {
		if _, ok := final[id]; ok {
			put = append(put, id)
		}
	}
	for id := range t.src {
		if _, ok := final[id]; !ok {
			del = append(del, id)
		}
	}
	slices.Sort(put)
	slices.Sort(del)
	return put, del
}

// check decides about a request's batches before any is written, as if
// they were written one after another. write false with Code 0 means a
// duplicate: BaseOffset is the original offset.
func (t *producerTable) check(batches []Batch) (Result, bool) {
	var after map[int64]schema.ProducerState // the request's own earlier batches
	for i := range batches {
		b := &batches[i]
		if !b.Idempotent() {
			continue
		}
		ps, known := after[b.ProducerID]
		if !known {
			ps, known = t.get(b.ProducerID)
		}
		dup, code, msg := checkSequence(ps, known, b)
		switch {
		case code != 0:
			return Result{Code: code, Msg: msg}, false
		case dup >= 0 && len(batches) == 1:
			return Result{BaseOffset: dup}, false
		case dup >= 0:
			return Result{Code: kerr.DuplicateSequenceNumber.Code,
				Msg: "duplicate batch inside a multi-batch produce"}, false
		}
		if after == nil {
			after = make(map[int64]schema.ProducerState)
		}
		after[b.ProducerID] = appendBatch(ps, known, b, math.MaxInt64, 0) // offset not known yet
	}
	return Result{}, true
}

// checkSequence applies Kafka's sequence rules to one batch: dup >= 0 is the
// base offset of an identical earlier batch.
func checkSequence(ps schema.ProducerState, known bool, b *Batch) (dup int64, code int16, msg string) {
	if !known {
		return -1, 0, "" // no state (new, expired or trimmed producer): any sequence starts it
	}
	switch {
	case b.ProducerEpoch < ps.Epoch:
		return -1, kerr.InvalidProducerEpoch.Code,
			fmt.Sprintf("producer %d epoch %d is older than %d", b.ProducerID, b.ProducerEpoch, ps.Epoch)
	case b.ProducerEpoch > ps.Epoch:
		if b.BaseSequence != 0 {
			return -1, kerr.OutOfOrderSequenceNumber.Code,
				fmt.Sprintf("producer %d new epoch %d must start at sequence 0, got %d", b.ProducerID, b.ProducerEpoch, b.BaseSequence)
		}
		return -1, 0, ""
	}
	last := b.LastSequence()
	for _, pb := range ps.Batches {
		if pb.FirstSeq == b.BaseSequence && pb.LastSeq == last {
			return pb.BaseOffset, 0, ""
		}
	}
	if n := len(ps.Batches); n > 0 {
		want := nextSeq(ps.Batches[n-1].LastSeq)
		if b.BaseSequence != want {
			return -1, kerr.OutOfOrderSequenceNumber.Code,
				fmt.Sprintf("producer %d epoch %d: sequence %d, expected %d", b.ProducerID, b.ProducerEpoch, b.BaseSequence, want)
		}
	}
	return -1, 0, ""
}

func nextSeq(s int32) int32 {
	if s == 1<<31-1 {
		return 0
	}
	return s + 1
}

// record notes a batch written at offset.
func (t *producerTable) record(b *Batch, offset, nowMs int64) {
	if !b.Idempotent() {
		return
	}
	ps, known := t.get(b.ProducerID)
	t.set(b.ProducerID, appendBatch(ps, known, b, offset, nowMs))
}

// appendBatch returns ps with b as its newest batch (a new epoch starts
// afresh) and at most keptBatches kept.
func appendBatch(ps schema.ProducerState, known bool, b *Batch, offset, nowMs int64) schema.ProducerState {
	if !known || ps.Epoch != b.ProducerEpoch {
		ps = schema.ProducerState{Epoch: b.ProducerEpoch}
	}
	batches := slices.Clone(ps.Batches)
	batches = append(batches, schema.ProducerBatch{
		FirstSeq: b.BaseSequence, LastSeq: b.LastSequence(), BaseOffset: offset, Timestamp: nowMs,
	})
	if len(batches) > keptBatches {
		batches = batches[len(batches)-keptBatches:]
	}
	ps.Batches = batches
	return ps
}

// result is the table to commit: idle producers expired and the table
// bounded (oldest last write dropped first).
func (t *producerTable) result(now time.Time) map[int64]schema.ProducerState {
	if !t.copied {
		return t.src
	}
	cutoff := now.Add(-producerExpiry).UnixMilli()
	for id, ps := range t.cur {
		if lastWrite(ps) < cutoff {
			delete(t.cur, id)
		}
	}
	if over := len(t.cur) - maxProducers; over > 0 {
		ids := slices.Collect(maps.Keys(t.cur))
		slices.SortFunc(ids, func(x, y int64) int { return cmp.Compare(lastWrite(t.cur[x]), lastWrite(t.cur[y])) })
		for _, id := range ids[:over] {
			delete(t.cur, id)
		}
	}
	if len(t.cur) == 0 {
		return nil
	}
	return t.cur
}

func lastWrite(ps schema.ProducerState) int64 {
	if n := len(ps.Batches); n > 0 {
		return ps.Batches[n-1].Timestamp
	}
	return 0
}
