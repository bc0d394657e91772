package apis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/authrule"
	"github.com/kproxy/kproxy/proxy/apis/produceguard"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
	"github.com/kproxy/kproxy/proxy/apis/split"
	"github.com/kproxy/kproxy/retry"
)

// minBudget is the least time any routed request may spend retrying, so
// that a tiny timeout still allows a few quick retries.
const minBudget = time.Second

// produceOp splits a Produce by partition owner. Only definite refusals are
// retried (within the request's timeout); an attempt that may have been
// written is answered REQUEST_TIMED_OUT so the client's idempotence decides.
type produceOp struct {
	d   *Dispatcher
	ep  endpoint // the client's listener's advertised address (leader hints)
	s   split.Engine
	req kmsg.ProduceRequest

	enc      kmsg.ProduceRequest // scratch for sub-requests
	encParts []kmsg.ProduceRequestTopicPartition
	vec      vecEncoder                           // sub-requests in pieces (see EncodeVec)
	dec      kmsg.ProduceResponse                 // scratch for broker answers
	out      kmsg.ProduceResponse                 // scratch for the merged answer
	answers  []kmsg.ProduceResponseTopicPartition // item i's answer
	tstart   []int32                              // first item of each request topic
	throttle int32
	client   *string              // the client's id, for the log of refused partitions
	arrived  *recordcheck.Arrival // what the frame gave as it arrived (Header.Arrival), during addItems
	hints    bool                 // a leader hint was rewritten to point at the proxy
	byID     bool                 // v13+: topics by id
	// encrypted: some record data was rewritten (encryptRecords), so the
	// client's body may not be forwarded as it is.
	encrypted bool
	encBufs   []*[]byte         // the encrypted record data
	checked   recordcheck.Batch // the item validation read (level full), encrypted without decompressing again

	dups produceguard.Dups                    // items listed again later: not forwarded, not answered
	kept []kmsg.ProduceResponseTopicPartition // scratch of keptTopics
}

func (d *Dispatcher) beginProduce(ctx context.Context, conn uint64, h Header, body []byte) (op, Reply, error) {
	o, _ := d.producePool.Get().(*produceOp)
	if o == nil {
		o = &produceOp{}
	}
	o.d, o.ep, o.client, o.arrived = d, d.endpoint(ctx), h.ClientID, h.Arrival
	o.req = kmsg.ProduceRequest{Version: h.Version, Topics: o.req.Topics} // reuse, but no stale fields
	if err := o.req.UnsafeReadFrom(body); err != nil {
		o.release()
		return nil, Reply{}, fmt.Errorf("decode: %w", err)
	}
	o.byID = h.Version >= 13
	o.s.Init(&d.eng, o, split.Request{
		Key: h.Key, Version: h.Version, Conn: conn, ClientID: h.ClientID, Own: body, Hold: holdOf(&o.req),
		Deadline: retry.Budget(d.now(), time.Duration(o.req.TimeoutMillis)*time.Millisecond, minBudget),
		RouteBy:  split.ByPartitionWrite, // a first write may take its lease in the producer's zone
		Ordered:  o.req.Acks != 0,        // read order kept across retries; acks=0 has none
		PerItem:  d.cfg.PerPartitionProduce,
	})
	o.addItems(ctx, o.produceCheck(ctx))
	o.arrived = nil // the frame's: valid only during Begin
	if o.req.Acks == 0 {
		r, err := o.fireAndForget(ctx)
		return nil, r, err
	}
	o.s.Dispatch(ctx, o.whole(body))
	return o, Reply{}, nil
}

// produceCheck is Kafka's: Write on each topic, and a transactional
// produce needs Write on its transactional id or fails whole.
func (o *produceOp) produceCheck(ctx context.Context) *authrule.TopicCheck {
	chk := o.d.topicCheck(ctx, int16(kmsg.Produce))
	if id := o.req.TransactionID; id != nil && chk.Guard().On() &&
		!chk.Guard().Allowed(kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *id) {
		chk.RefuseAll(kerr.TransactionalIDAuthorizationFailed.Code)
	}
	return chk
}

func (o *produceOp) addItems(ctx context.Context, chk *authrule.TopicCheck) {
	n := split.CountParts(o.req.Topics, produceParts)
	o.answers = slices.Grow(o.answers[:0], n)[:n]
	o.s.Reserve(n)
	o.tstart = split.TopicStarts(o.tstart, o.req.Topics, produceParts)
	whole := o.transactionalNoID()
	o.markDuplicates()
	i := 0
	for ti := range o.req.Topics {
		t := &o.req.Topics[ti]
		for pi := range t.Partitions {
			part := t.Partitions[pi].Partition
			name, rid, code := o.d.partRoute(chk, t.Topic, t.TopicID, o.byID, part)
			switch {
			case o.dups.Dropped(i):
				// Neither forwarded nor answered (Merge leaves it out).
				o.d.pg.Refused(produceguard.Duplicate, 0, o.client, o.req.Version, t.Topic, part)
				o.s.AddLocal(name, t.TopicID, part, int32(ti), int32(pi), 0)
				i++
				continue
			case whole != 0:
				code = whole
			case code == 0:
				code = o.checkPartition(ctx, name, int32(ti), int32(pi))
			}
			if code == 0 {
				code = o.encryptRecords(ctx, name, int32(ti), int32(pi)) // see encryptRecords
			}
			o.checked.Release()
			i++
			if code != 0 {
				o.s.AddLocal(name, t.TopicID, part, int32(ti), int32(pi), code)
				continue
			}
			o.s.Add(name, rid, part, int32(ti), int32(pi))
		}
	}
}

// fireAndForget sends an acks=0 produce: there is no answer to wait for,
// so nothing can be retried. Like Kafka, a partition the proxy cannot
// route closes the connection, which makes the client refresh metadata.
func (o *produceOp) fireAndForget(ctx context.Context) (Reply, error) {
	o.s.Dispatch(ctx, o.whole(o.s.Own()))
	defer o.release()
	var errs []error
	for i := range o.answers {
		if c := o.answers[i].ErrorCode; c != 0 {
			k := o.s.KeyOf(int32(i))
			errs = append(errs, fmt.Errorf("acks=0 produce to %s/%d: %w", k.Topic, k.Part, kerr.ErrorForCode(c)))
		}
	}
	errs = append(errs, o.s.SendErrors()...)
	return Reply{NoResponse: true}, errors.Join(errs...)
}

func (o *produceOp) finish(ctx context.Context) (Reply, error) {
	r, err := answerReply(o.s.Finish(ctx))
	o.release()
	return r, err
}

// release returns o to the pool once its answer is encoded.
func (o *produceOp) release() {
	d := o.d
	o.s.Reset()
	clear(o.answers)
	o.throttle, o.hints, o.byID, o.client, o.encrypted = 0, false, false, nil, false
	o.dups.Reset()
	clear(o.kept)
	for _, b := range o.encBufs {
		d.bufs.Put(b)
	}
	clear(o.encBufs)
	o.encBufs = o.encBufs[:0]
	d.producePool.Put(o)
}

func (o *produceOp) Encode(dst []byte, idx []int32, _ int) []byte {
	o.subset(idx)
	return o.enc.AppendTo(slices.Grow(dst, o.encodedSizeBound()))
}

// subset makes o.enc the sub-request for items idx.
func (o *produceOp) subset(idx []int32) {
	r := &o.req
	o.enc = kmsg.ProduceRequest{
		Version: o.s.SubVersion(), TransactionID: r.TransactionID, Acks: r.Acks, TimeoutMillis: r.TimeoutMillis,
		UnknownTags: r.UnknownTags, Topics: split.Subset(&o.s, idx, r.Topics, produceParts, o.enc.Topics, &o.encParts),
	}
}

// EncodeVec leaves the sub-request's large record sets (and a whole body
// forwarded as it is) in the client's frame, for the Sender to write from
// there; the engine reclaims them before Finish returns. acks=0 produces
// are copied: nothing waits for their writes (see fireAndForget).
func (o *produceOp) EncodeVec(dst []byte, idx []int32, nsubs int, whole []byte) ([]byte, [][]byte) {
	if whole != nil {
		if o.req.Acks == 0 || len(whole) < vecMinBytes {
			return append(dst, whole...), nil
		}
		return dst, [][]byte{whole}
	}
	if o.req.Acks == 0 {
		return o.Encode(dst, idx, nsubs), nil
	}
	o.subset(idx)
	o.vec.secret = o.d.secret
	for ti := range o.enc.Topics {
		ps := o.enc.Topics[ti].Partitions
		for pi := range ps {
			o.vec.leaveOut(&ps[pi].Records)
		}
	}
	n := len(dst)
	skel, pieces, ok := o.vec.encode(&o.enc, slices.Grow(dst, o.skeletonSizeBound()))
	if !ok { // not expected (a test rules it out): send it whole
		return o.enc.AppendTo(slices.Grow(skel[:n], o.encodedSizeBound())), nil
	}
	return skel, pieces
}

// skeletonSizeBound is encodedSizeBound without the record sets EncodeVec
// leaves out (each replaced by a marker).
func (o *produceOp) skeletonSizeBound() int {
	n := o.encodedSizeBound()
	for ti := range o.enc.Topics {
		ps := o.enc.Topics[ti].Partitions
		for pi := range ps {
			if k := len(ps[pi].Records); k >= vecMinBytes {
				n -= k - markerLen
			}
		}
	}
	return n
}

// VecSizeHint bounds what EncodeVec appends for items idx without encoding
// them: what it copies, and the skeleton around what it leaves out.
func (o *produceOp) VecSizeHint(idx []int32, whole []byte) int {
	if whole != nil {
		if o.req.Acks == 0 || len(whole) < vecMinBytes {
			return len(whole)
		}
		return 0
	}
	n := produceFixedBytes
	if o.req.TransactionID != nil {
		n += len(*o.req.TransactionID)
	}
	for _, i := range idx {
		k := o.s.KeyOf(i)
		t := &o.req.Topics[k.TI]
		recs := len(t.Partitions[k.PI].Records)
		if recs >= vecMinBytes && o.req.Acks != 0 {
			recs = markerLen
		}
		n += producePerTopicBytes + len(t.Topic) + producePerPartBytes + recs // topics overcounted: a bound
	}
	return n
}

// Bounds of a produce request's encoding, record sets and names aside.
const (
	produceFixedBytes    = 64 // acks, timeout, array lengths, tagged fields
	producePerTopicBytes = 40 // topic id or name length, partition count, tags
	producePerPartBytes  = 32 // partition, records length, tags
)

// encodedSizeBound is at least the size of o.enc encoded (unknown tagged
// fields aside, which AppendTo then grows for), so that AppendTo does not
// grow its buffer: growing a buffer of megabytes of record batches copies
// them again and again.
func (o *produceOp) encodedSizeBound() int {
	n := produceFixedBytes
	if o.enc.TransactionID != nil {
		n += len(*o.enc.TransactionID)
	}
	for ti := range o.enc.Topics {
		t := &o.enc.Topics[ti]
		n += producePerTopicBytes + len(t.Topic)
		for pi := range t.Partitions {
			n += producePerPartBytes + len(t.Partitions[pi].Records)
		}
	}
	return n
}

func produceParts(t *kmsg.ProduceRequestTopic) *[]kmsg.ProduceRequestTopicPartition {
	return &t.Partitions
}

func (o *produceOp) Absorb(body []byte, si int) (bool, error) {
	// Reused: kmsg zeroes list elements it decodes into, so only the
	// top level (tagged fields) needs resetting.
	o.dec = kmsg.ProduceResponse{Version: o.s.VersionOf(si), Topics: o.dec.Topics}
	r := &o.dec
	if err := r.UnsafeReadFrom(body); err != nil {
		return false, err
	}
	o.throttle = max(o.throttle, r.ThrottleMillis)
	clean := len(r.Brokers) == 0
	m := o.s.Matcher(si)
	for ti := range r.Topics {
		t := &r.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			i := m.Find(t.Topic, t.TopicID, o.byID, p.Partition)
			if i < 0 {
				continue // not asked for
			}
			if p.CurrentLeader.LeaderID >= 0 {
				p.CurrentLeader.LeaderID = o.d.cfg.NodeID
				o.hints, clean = true, false
			}
			o.answers[i] = *p
			o.s.Answered(i, p.ErrorCode)
		}
	}
	return clean, nil
}

// Carries is split.Bridger (bridge.go).
func (o *produceOp) Carries(to int16) bool { return carries(&o.req, to) }

func (o *produceOp) Fail(i int32, code int16) {
	p := kmsg.NewProduceResponseTopicPartition()
	p.Partition = o.s.KeyOf(i).Part
	p.ErrorCode = code
	o.answers[i] = p
}

func (o *produceOp) Merge(dst []byte) []byte {
	o.out = kmsg.ProduceResponse{Version: o.s.Version(), ThrottleMillis: o.throttle, Topics: slices.Grow(o.out.Topics[:0], len(o.req.Topics))[:len(o.req.Topics)]}
	resp := &o.out
	if o.dups.Count() > 0 {
		resp.Topics = o.keptTopics(resp.Topics[:0])
	} else {
		for ti := range o.req.Topics {
			t := &o.req.Topics[ti]
			resp.Topics[ti] = kmsg.ProduceResponseTopic{Topic: t.Topic, TopicID: t.TopicID, Partitions: o.answers[o.tstart[ti]:o.tstart[ti+1]]}
		}
	}
	if o.hints && slices.ContainsFunc(o.answers, func(p kmsg.ProduceResponseTopicPartition) bool { return p.CurrentLeader.LeaderID >= 0 }) {
		d := o.d // the hint's endpoint: the proxy
		resp.Brokers = []kmsg.ProduceResponseBroker{{NodeID: d.cfg.NodeID, Host: o.ep.host, Port: o.ep.port}}
	}
	return resp.AppendTo(dst)
}

// transactionalNoID is Kafka's first check of a Produce: a transactional
// batch in a request without a transactional id fails the whole request
// with TRANSACTIONAL_ID_AUTHORIZATION_FAILED. It returns that code, or 0.
func (o *produceOp) transactionalNoID() int16 {
	if o.req.TransactionID != nil || o.d.pg.Level() == recordcheck.Off {
		return 0
	}
	var code int16
	for ti := range o.req.Topics {
		t := &o.req.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			if recordcheck.Transactional(p.Records) {
				code = kerr.TransactionalIDAuthorizationFailed.Code
				o.d.pg.Refused(recordcheck.TransactionalNoID.String(), code, o.client, o.req.Version, t.Topic, p.Partition)
			}
		}
	}
	return code
}

// checkPartition checks item (ti, pi), which exists and may be written
// (Kafka checks the rest after both), and returns the code to answer it
// with, or 0 to forward it.
func (o *produceOp) checkPartition(ctx context.Context, topic string, ti, pi int32) int16 {
	p := &o.req.Topics[ti].Partitions[pi]
	reason, code := o.partitionFault(ctx, p.Records)
	if code != 0 {
		o.d.pg.Refused(reason, code, o.client, o.req.Version, topic, p.Partition)
	}
	return code
}

// partitionFault is why records may not be forwarded, and Kafka's code
// for it (0: they may).
func (o *produceOp) partitionFault(ctx context.Context, records []byte) (string, int16) {
	if !produceguard.ValidAcks(o.req.Acks) {
		return produceguard.RequiredAcks, kerr.InvalidRequiredAcks.Code
	}
	if r := o.d.pg.Check.CheckSummedBatch(o.req.Version, o.req.TransactionID != nil, records, o.arrived, &o.checked); !r.OK() {
		return r.Reason.String(), r.Code
	}
	if o.req.TransactionID != nil && o.d.pg.Level() != recordcheck.Off &&
		recordcheck.Transactional(records) && !o.d.poolServesTxns(ctx) {
		return produceguard.TxnState, kerr.InvalidTxnState.Code
	}
	return "", 0
}

// poolServesTxns reports whether every broker of the pool advertises
// AddPartitionsToTxn and EndTxn, as the proxy learned from their
// ApiVersions (probed first if no broker is known yet).
//
// A transactional batch sent to a pool without them cannot belong to a
// transaction that began (no AddPartitionsToTxn can have succeeded), so it
// is answered INVALID_TXN_STATE, as Kafka 3.6+ answers a batch whose
// producer never added the partition; KafScale advertises no transaction
// APIs. A pool that serves transactions checks this itself (Kafka 3.6+
// verifies every transactional append against its coordinator), so the
// proxy keeps no per-producer record of its own: one would be wrong behind
// several proxy replicas, where the AddPartitionsToTxn may have passed
// through another replica. A pool whose brokers are all unknown is left to
// decide (the proxy cannot tell).
func (d *Dispatcher) poolServesTxns(ctx context.Context) bool {
	t := d.vers.current()
	if len(t.brokers) == 0 {
		t = d.vers.refresh(ctx)
	}
	if len(t.brokers) == 0 {
		return true
	}
	return t.direct.get(int16(kmsg.AddPartitionsToTxn)).ok() && t.direct.get(int16(kmsg.EndTxn)).ok()
}

// markDuplicates finds the partitions the request lists more than once
// (produceguard.Dups): as Kafka, only the last listing is appended and
// answered.
func (o *produceOp) markDuplicates() {
	o.dups.Reset()
	for ti := range o.req.Topics {
		t := &o.req.Topics[ti]
		for pi := range t.Partitions {
			k := produceguard.Key{Part: t.Partitions[pi].Partition}
			if o.byID {
				k.ID = t.TopicID
			} else {
				k.Topic = t.Topic
			}
			o.dups.Add(k)
		}
	}
	o.dups.Mark()
}

// keptTopics is the answer's topics without the dropped listings (and
// without a topic that has none left); o.kept holds their partitions.
func (o *produceOp) keptTopics(dst []kmsg.ProduceResponseTopic) []kmsg.ProduceResponseTopic {
	o.kept = append(o.kept[:0], o.answers...)[:0]
	for ti := range o.req.Topics {
		t := &o.req.Topics[ti]
		start := len(o.kept)
		for i := o.tstart[ti]; i < o.tstart[ti+1]; i++ {
			if !o.dups.Dropped(int(i)) {
				o.kept = append(o.kept, o.answers[i])
			}
		}
		if len(o.kept) > start {
			dst = append(dst, kmsg.ProduceResponseTopic{Topic: t.Topic, TopicID: t.TopicID, Partitions: o.kept[start:len(o.kept):len(o.kept)]})
		}
	}
	return dst
}

// defaultBadInputLogInterval is the proxy's default (Limits.BadInputLogInterval).
const defaultBadInputLogInterval = 10 * time.Second

// newProduceGuard is the Produce checks of cfg.
func newProduceGuard(cfg Config) (*produceguard.Guard, error) {
	return produceguard.New(produceguard.Config{
		Level: cfg.ProduceValidation, MaxBatchBytes: cfg.MaxBatchBytes, BadInput: cfg.BadInput,
		Logger: cfg.Logger, LogInterval: cfg.BadInputLogInterval, Now: cfg.Now,
	})
}
