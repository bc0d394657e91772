package apis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/retry"
)

// minBudget is the least time any routed request may spend retrying, so
// that a tiny timeout still allows a few quick retries.
const minBudget = time.Second

// produceOp splits a Produce by partition owner. Only definite refusals are
// retried (within the request's timeout); an attempt that may have been
// written is answered REQUEST_TIMED_OUT so the client's idempotence decides.
type produceOp struct {
	s   splitter
	req kmsg.ProduceRequest

	enc      kmsg.ProduceRequest // scratch for sub-requests
	encParts []kmsg.ProduceRequestTopicPartition
	dec      kmsg.ProduceResponse                 // scratch for broker answers
	out      kmsg.ProduceResponse                 // scratch for the merged answer
	answers  []kmsg.ProduceResponseTopicPartition // item i's answer
	tstart   []int32                              // first item of each request topic
	throttle int32
	hints    bool // a leader hint was rewritten to point at the proxy
	byID     bool // v13+: topics by id
}

func (d *Dispatcher) beginProduce(ctx context.Context, conn uint64, h Header, body []byte) (op, Reply, error) {
	o, _ := d.producePool.Get().(*produceOp)
	if o == nil {
		o = &produceOp{}
	}
	o.s.init(d, o, h, conn)
	o.s.own = body
	o.req = kmsg.ProduceRequest{Version: h.Version, Topics: o.req.Topics} // reuse, but no stale fields
	if err := o.req.UnsafeReadFrom(o.s.own); err != nil {
		o.release()
		return nil, Reply{}, fmt.Errorf("decode: %w", err)
	}
	o.byID = h.Version >= 13
	o.s.hold = holdOf(&o.req)
	o.s.deadline = retry.Budget(d.now(), time.Duration(o.req.TimeoutMillis)*time.Millisecond, minBudget)
	o.addItems()
	if o.req.Acks == 0 {
		r, err := o.fireAndForget(ctx)
		return nil, r, err
	}
	o.s.dispatch(ctx, o.s.own)
	return o, Reply{}, nil
}

func (o *produceOp) addItems() {
	n := countParts(o.req.Topics, produceParts)
	o.answers = slices.Grow(o.answers[:0], n)[:n]
	o.s.reserve(n)
	o.tstart = topicStarts(o.tstart, o.req.Topics, produceParts)
	for ti := range o.req.Topics {
		t := &o.req.Topics[ti]
		for pi := range t.Partitions {
			o.s.d.addPartition(&o.s, t.Topic, t.TopicID, o.byID, t.Partitions[pi].Partition, int32(ti), int32(pi))
		}
	}
}

// fireAndForget sends an acks=0 produce: there is no answer to wait for,
// so nothing can be retried. Like Kafka, a partition the proxy cannot
// route closes the connection, which makes the client refresh metadata.
func (o *produceOp) fireAndForget(ctx context.Context) (Reply, error) {
	o.s.dispatch(ctx, o.s.own)
	defer o.release()
	var errs []error
	for i := range o.answers {
		if c := o.answers[i].ErrorCode; c != 0 {
			k := o.s.keyOf(int32(i))
			errs = append(errs, fmt.Errorf("acks=0 produce to %s/%d: %w", k.topic, k.part, kerr.ErrorForCode(c)))
		}
	}
	errs = append(errs, o.s.sendErrors()...)
	return Reply{NoResponse: true}, errors.Join(errs...)
}

func (o *produceOp) finish(ctx context.Context) (Reply, error) {
	r, err := o.s.finish(ctx)
	o.release()
	return r, err
}

// release returns o to the pool once its answer is encoded.
func (o *produceOp) release() {
	d := o.s.d
	o.s.reset()
	clear(o.answers)
	o.throttle, o.hints, o.byID = 0, false, false
	d.producePool.Put(o)
}

func (o *produceOp) encode(dst []byte, idx []int32, _ int) []byte {
	r := &o.req
	o.enc = kmsg.ProduceRequest{
		Version: r.Version, TransactionID: r.TransactionID, Acks: r.Acks, TimeoutMillis: r.TimeoutMillis,
		UnknownTags: r.UnknownTags, Topics: subset(&o.s, idx, r.Topics, produceParts, o.enc.Topics, &o.encParts),
	}
	return o.enc.AppendTo(slices.Grow(dst, o.encodedSizeBound()))
}

// encodedSizeBound is at least the size of o.enc encoded (unknown tagged
// fields aside, which AppendTo then grows for), so that AppendTo does not
// grow its buffer: growing a buffer of megabytes of record batches copies
// them again and again.
func (o *produceOp) encodedSizeBound() int {
	const (
		fixed    = 64 // acks, timeout, array lengths, tagged fields
		perTopic = 40 // topic id or name length, partition count, tags
		perPart  = 32 // partition, records length, tags
	)
	n := fixed
	if o.enc.TransactionID != nil {
		n += len(*o.enc.TransactionID)
	}
	for ti := range o.enc.Topics {
		t := &o.enc.Topics[ti]
		n += perTopic + len(t.Topic)
		for pi := range t.Partitions {
			n += perPart + len(t.Partitions[pi].Records)
		}
	}
	return n
}

func produceParts(t *kmsg.ProduceRequestTopic) *[]kmsg.ProduceRequestTopicPartition {
	return &t.Partitions
}

func (o *produceOp) absorb(body []byte, si int) (bool, error) {
	// Reused: kmsg zeroes list elements it decodes into, so only the
	// top level (tagged fields) needs resetting.
	o.dec = kmsg.ProduceResponse{Version: o.s.version, Topics: o.dec.Topics}
	r := &o.dec
	if err := r.UnsafeReadFrom(body); err != nil {
		return false, err
	}
	o.throttle = max(o.throttle, r.ThrottleMillis)
	clean := len(r.Brokers) == 0
	m := o.s.matcher(si)
	for ti := range r.Topics {
		t := &r.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			i := m.find(t.Topic, t.TopicID, o.byID, p.Partition)
			if i < 0 {
				continue // not asked for
			}
			if p.CurrentLeader.LeaderID >= 0 {
				p.CurrentLeader.LeaderID = o.s.d.cfg.NodeID
				o.hints, clean = true, false
			}
			o.answers[i] = *p
			o.s.answered(i, p.ErrorCode)
		}
	}
	return clean, nil
}

func (o *produceOp) fail(i int32, code int16) {
	p := kmsg.NewProduceResponseTopicPartition()
	p.Partition = o.s.keyOf(i).part
	p.ErrorCode = code
	o.answers[i] = p
}

func (o *produceOp) merge(dst []byte) []byte {
	o.out = kmsg.ProduceResponse{Version: o.s.version, ThrottleMillis: o.throttle, Topics: slices.Grow(o.out.Topics[:0], len(o.req.Topics))[:len(o.req.Topics)]}
	resp := &o.out
	for ti := range o.req.Topics {
		t := &o.req.Topics[ti]
		resp.Topics[ti] = kmsg.ProduceResponseTopic{Topic: t.Topic, TopicID: t.TopicID, Partitions: o.answers[o.tstart[ti]:o.tstart[ti+1]]}
	}
	if o.hints && slices.ContainsFunc(o.answers, func(p kmsg.ProduceResponseTopicPartition) bool { return p.CurrentLeader.LeaderID >= 0 }) {
		d := o.s.d // the hint's endpoint: the proxy
		resp.Brokers = []kmsg.ProduceResponseBroker{{NodeID: d.cfg.NodeID, Host: d.cfg.AdvertisedHost, Port: d.cfg.AdvertisedPort}}
	}
	return resp.AppendTo(dst)
}
