package apis

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/retry"
)

// The offset APIs (ListOffsets, OffsetForLeaderEpoch, DeleteRecords) are
// split by partition owner like Produce, but carry no records and no
// leader hints, so one small adapter per API suffices.

func (d *Dispatcher) beginOffsets(ctx context.Context, conn uint64, h Header, body []byte) (op, Reply, error) {
	var o interface {
		partOps
		op
		decode(d *Dispatcher) error
		sp() *splitter
	}
	switch kmsg.Key(h.Key) {
	case kmsg.ListOffsets:
		o = &listOffsetsOp{}
	case kmsg.OffsetForLeaderEpoch:
		o = &epochOp{}
	default:
		o = &deleteRecordsOp{}
	}
	s := o.sp()
	s.init(d, o, h, conn)
	s.own = body
	if err := o.decode(d); err != nil {
		return nil, Reply{}, fmt.Errorf("decode: %w", err)
	}
	s.dispatch(ctx, s.own)
	return o, Reply{}, nil
}

// budget is the retry deadline for a request with an optional timeout.
func (d *Dispatcher) budget(timeoutMillis int32) time.Time {
	t := time.Duration(timeoutMillis) * time.Millisecond
	if t <= 0 {
		t = d.cfg.RetryBudget
	}
	return retry.Budget(d.now(), t, minBudget)
}

// addTopics adds every partition of a request's topics to s, by name.
func addTopics[T, P any](d *Dispatcher, s *splitter, topics []T, name func(*T) string, partsOf func(*T) *[]P, part func(*P) int32) {
	s.items = make([]item, 0, countParts(topics, partsOf))
	for ti := range topics {
		t := &topics[ti]
		ps := *partsOf(t)
		for pi := range ps {
			d.addPartition(s, name(t), [16]byte{}, false, part(&ps[pi]), int32(ti), int32(pi))
		}
	}
}

// slotsByTopic cuts the per-item answers into the client's topics.
func slotsByTopic[P any](s *splitter, slots []P, ntopics int, emit func(ti int, parts []P)) {
	lo := 0
	for ti := range ntopics {
		hi := lo
		for hi < len(s.items) && s.items[hi].ti == int32(ti) {
			hi++
		}
		emit(ti, slots[lo:hi])
		lo = hi
	}
}

// ListOffsets.

type listOffsetsOp struct {
	s       splitter
	req     kmsg.ListOffsetsRequest
	enc     kmsg.ListOffsetsRequest
	scratch []kmsg.ListOffsetsRequestTopicPartition
	slots   []kmsg.ListOffsetsResponseTopicPartition
	thr     int32
}

func (o *listOffsetsOp) sp() *splitter { return &o.s }

func (o *listOffsetsOp) decode(d *Dispatcher) error {
	o.req.Version = o.s.version
	if err := o.req.UnsafeReadFrom(o.s.own); err != nil {
		return err
	}
	// TimeoutMillis exists from v10 on; before that the decoded struct holds
	// kmsg's default (30 s), which is no budget the client asked for.
	var timeout int32
	if o.s.version >= 10 {
		timeout = o.req.TimeoutMillis
	}
	o.s.deadline = d.budget(timeout)
	o.s.hold = holdOf(&o.req)
	o.slots = make([]kmsg.ListOffsetsResponseTopicPartition, countParts(o.req.Topics, loParts))
	addTopics(d, &o.s, o.req.Topics, func(t *kmsg.ListOffsetsRequestTopic) string { return t.Topic }, loParts,
		func(p *kmsg.ListOffsetsRequestTopicPartition) int32 { return p.Partition })
	return nil
}

func loParts(t *kmsg.ListOffsetsRequestTopic) *[]kmsg.ListOffsetsRequestTopicPartition {
	return &t.Partitions
}

func (o *listOffsetsOp) finish(ctx context.Context) (Reply, error) { return o.s.finish(ctx) }
func (o *listOffsetsOp) enough() bool                              { return false }

func (o *listOffsetsOp) encode(dst []byte, idx []int32, _ int) []byte {
	topics := o.enc.Topics // the scratch, not the request's
	o.enc = o.req
	o.enc.Topics = subset(&o.s, idx, o.req.Topics, loParts, topics, &o.scratch)
	return o.enc.AppendTo(dst)
}

func (o *listOffsetsOp) absorb(body []byte, si int) (bool, error) {
	r := &kmsg.ListOffsetsResponse{Version: o.s.version}
	if err := r.UnsafeReadFrom(body); err != nil {
		return false, err
	}
	o.thr = max(o.thr, r.ThrottleMillis)
	m := o.s.matcher(si)
	for ti := range r.Topics {
		t := &r.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if i := m.find(t.Topic, [16]byte{}, false, p.Partition); i >= 0 {
				o.slots[i] = *p
				o.s.answered(i, p.ErrorCode)
			}
		}
	}
	return true, nil
}

func (o *listOffsetsOp) fail(i int32, code int16) {
	p := kmsg.NewListOffsetsResponseTopicPartition()
	p.Partition, p.ErrorCode = o.s.items[i].part, code
	o.slots[i] = p
}

func (o *listOffsetsOp) merge(dst []byte) []byte {
	resp := kmsg.ListOffsetsResponse{Version: o.s.version, ThrottleMillis: o.thr}
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(o.req.Topics))
	slotsByTopic(&o.s, o.slots, len(o.req.Topics), func(ti int, ps []kmsg.ListOffsetsResponseTopicPartition) {
		resp.Topics[ti] = kmsg.ListOffsetsResponseTopic{Topic: o.req.Topics[ti].Topic, Partitions: ps}
	})
	return resp.AppendTo(dst)
}

// OffsetForLeaderEpoch.

type epochOp struct {
	s       splitter
	req     kmsg.OffsetForLeaderEpochRequest
	enc     kmsg.OffsetForLeaderEpochRequest
	scratch []kmsg.OffsetForLeaderEpochRequestTopicPartition
	slots   []kmsg.OffsetForLeaderEpochResponseTopicPartition
	thr     int32
}

func (o *epochOp) sp() *splitter { return &o.s }

func (o *epochOp) decode(d *Dispatcher) error {
	o.req.Version = o.s.version
	if err := o.req.UnsafeReadFrom(o.s.own); err != nil {
		return err
	}
	o.s.deadline = d.budget(0)
	o.s.hold = holdOf(&o.req)
	o.slots = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, countParts(o.req.Topics, oeParts))
	addTopics(d, &o.s, o.req.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic }, oeParts,
		func(p *kmsg.OffsetForLeaderEpochRequestTopicPartition) int32 { return p.Partition })
	return nil
}

func oeParts(t *kmsg.OffsetForLeaderEpochRequestTopic) *[]kmsg.OffsetForLeaderEpochRequestTopicPartition {
	return &t.Partitions
}

func (o *epochOp) finish(ctx context.Context) (Reply, error) { return o.s.finish(ctx) }
func (o *epochOp) enough() bool                              { return false }

func (o *epochOp) encode(dst []byte, idx []int32, _ int) []byte {
	topics := o.enc.Topics // the scratch, not the request's
	o.enc = o.req
	o.enc.Topics = subset(&o.s, idx, o.req.Topics, oeParts, topics, &o.scratch)
	return o.enc.AppendTo(dst)
}

func (o *epochOp) absorb(body []byte, si int) (bool, error) {
	r := &kmsg.OffsetForLeaderEpochResponse{Version: o.s.version}
	if err := r.UnsafeReadFrom(body); err != nil {
		return false, err
	}
	o.thr = max(o.thr, r.ThrottleMillis)
	m := o.s.matcher(si)
	for ti := range r.Topics {
		t := &r.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if i := m.find(t.Topic, [16]byte{}, false, p.Partition); i >= 0 {
				o.slots[i] = *p
				o.s.answered(i, p.ErrorCode)
			}
		}
	}
	return true, nil
}

func (o *epochOp) fail(i int32, code int16) {
	p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
	p.Partition, p.ErrorCode, p.LeaderEpoch, p.EndOffset = o.s.items[i].part, code, -1, -1
	o.slots[i] = p
}

func (o *epochOp) merge(dst []byte) []byte {
	resp := kmsg.OffsetForLeaderEpochResponse{Version: o.s.version, ThrottleMillis: o.thr}
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(o.req.Topics))
	slotsByTopic(&o.s, o.slots, len(o.req.Topics), func(ti int, ps []kmsg.OffsetForLeaderEpochResponseTopicPartition) {
		resp.Topics[ti] = kmsg.OffsetForLeaderEpochResponseTopic{Topic: o.req.Topics[ti].Topic, Partitions: ps}
	})
	return resp.AppendTo(dst)
}

// DeleteRecords.

type deleteRecordsOp struct {
	s       splitter
	req     kmsg.DeleteRecordsRequest
	enc     kmsg.DeleteRecordsRequest
	scratch []kmsg.DeleteRecordsRequestTopicPartition
	slots   []kmsg.DeleteRecordsResponseTopicPartition
	thr     int32
}

func (o *deleteRecordsOp) sp() *splitter { return &o.s }

func (o *deleteRecordsOp) decode(d *Dispatcher) error {
	o.req.Version = o.s.version
	if err := o.req.UnsafeReadFrom(o.s.own); err != nil {
		return err
	}
	o.s.deadline = d.budget(o.req.TimeoutMillis)
	o.s.hold = holdOf(&o.req)
	o.slots = make([]kmsg.DeleteRecordsResponseTopicPartition, countParts(o.req.Topics, drParts))
	addTopics(d, &o.s, o.req.Topics, func(t *kmsg.DeleteRecordsRequestTopic) string { return t.Topic }, drParts,
		func(p *kmsg.DeleteRecordsRequestTopicPartition) int32 { return p.Partition })
	return nil
}

func drParts(t *kmsg.DeleteRecordsRequestTopic) *[]kmsg.DeleteRecordsRequestTopicPartition {
	return &t.Partitions
}

func (o *deleteRecordsOp) finish(ctx context.Context) (Reply, error) { return o.s.finish(ctx) }
func (o *deleteRecordsOp) enough() bool                              { return false }

func (o *deleteRecordsOp) encode(dst []byte, idx []int32, _ int) []byte {
	topics := o.enc.Topics // the scratch, not the request's
	o.enc = o.req
	o.enc.Topics = subset(&o.s, idx, o.req.Topics, drParts, topics, &o.scratch)
	return o.enc.AppendTo(dst)
}

func (o *deleteRecordsOp) absorb(body []byte, si int) (bool, error) {
	r := &kmsg.DeleteRecordsResponse{Version: o.s.version}
	if err := r.UnsafeReadFrom(body); err != nil {
		return false, err
	}
	o.thr = max(o.thr, r.ThrottleMillis)
	m := o.s.matcher(si)
	for ti := range r.Topics {
		t := &r.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if i := m.find(t.Topic, [16]byte{}, false, p.Partition); i >= 0 {
				o.slots[i] = *p
				o.s.answered(i, p.ErrorCode)
			}
		}
	}
	return true, nil
}

func (o *deleteRecordsOp) fail(i int32, code int16) {
	p := kmsg.NewDeleteRecordsResponseTopicPartition()
	p.Partition, p.ErrorCode, p.LowWatermark = o.s.items[i].part, code, -1
	o.slots[i] = p
}

func (o *deleteRecordsOp) merge(dst []byte) []byte {
	resp := kmsg.DeleteRecordsResponse{Version: o.s.version, ThrottleMillis: o.thr}
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(o.req.Topics))
	slotsByTopic(&o.s, o.slots, len(o.req.Topics), func(ti int, ps []kmsg.DeleteRecordsResponseTopicPartition) {
		resp.Topics[ti] = kmsg.DeleteRecordsResponseTopic{Topic: o.req.Topics[ti].Topic, Partitions: ps}
	})
	return resp.AppendTo(dst)
}
