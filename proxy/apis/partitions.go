package apis

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/authrule"
	"github.com/kproxy/kproxy/proxy/apis/split"
	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/retry"
	"github.com/kproxy/kproxy/routing"
)

// The offset APIs (ListOffsets, OffsetForLeaderEpoch, DeleteRecords) are
// split by partition owner like Produce, but carry no records and no
// leader hints, so one generic adapter (partList) serves all three; each
// API only names its fields (partListSpec).

func (d *Dispatcher) beginOffsets(ctx context.Context, conn uint64, h Header, body []byte) (op, Reply, error) {
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)
	if err := req.(kmsg.UnsafeReadFrom).UnsafeReadFrom(body); err != nil {
		return nil, Reply{}, fmt.Errorf("decode: %w", err)
	}
	var o interface {
		split.Adapter
		op
		start(ctx context.Context, d *Dispatcher, h Header, conn uint64, body []byte, timeoutMillis int32)
	}
	var timeout int32 // the request's own retry budget; 0: Config.RetryBudget
	switch r := req.(type) {
	case *kmsg.ListOffsetsRequest:
		o = newPartList(r, &r.Topics, listOffsetsSpec)
		// TimeoutMillis exists from v10 on; before that the decoded struct
		// holds kmsg's default (30 s), which is no budget the client asked for.
		if h.Version >= 10 {
			timeout = r.TimeoutMillis
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		o = newPartList(r, &r.Topics, epochSpec)
	case *kmsg.DeleteRecordsRequest:
		o = newPartList(r, &r.Topics, deleteRecordsSpec)
		timeout = r.TimeoutMillis
	default:
		return nil, Reply{}, fmt.Errorf("no offsets adapter for %T", req)
	}
	o.start(ctx, d, h, conn, body, timeout)
	return o, Reply{}, nil
}

// offsetsCheck is Kafka's: the row's operation on each topic (Describe to
// list offsets or epochs, Delete to delete records), except that
// OffsetForLeaderEpoch, which brokers' followers use too, is allowed on every
// topic for a principal with ClusterAction on the cluster.
func offsetsCheck(ctx context.Context, d *Dispatcher, key int16) *authrule.TopicCheck {
	chk := d.topicCheck(ctx, key)
	if key == int16(kmsg.OffsetForLeaderEpoch) && chk.Guard().On() &&
		chk.Guard().Quietly(kmsg.ACLOperationClusterAction, kmsg.ACLResourceTypeCluster, authz.ClusterName) {
		return nil // a nil check denies nothing
	}
	return chk
}

// budget is the retry deadline for a request with an optional timeout.
func (d *Dispatcher) budget(timeoutMillis int32) time.Time {
	t := time.Duration(timeoutMillis) * time.Millisecond
	if t <= 0 {
		t = d.cfg.RetryBudget
	}
	return retry.Budget(d.now(), t, minBudget)
}

// partListSpec names the fields of one offset API: request topics QT with
// partitions QP, response topics RT with partitions RP.
type partListSpec[QT, QP, RT, RP any] struct {
	topic    func(*QT) string
	parts    func(*QT) *[]QP
	part     func(*QP) int32
	answers  func(kmsg.Response) *[]RT
	answerOf func(*RT) (topic string, parts []RP)
	codeOf   func(*RP) (part int32, code int16)
	failed   func(part int32, code int16) RP
	answer   func(topic string, parts []RP) RT
}

// partList adapts a request of topics and partitions to the split engine:
// items are partitions, routed by owner, answered per partition.
type partList[QT, QP, RT, RP any] struct {
	s        split.Engine
	req      kmsg.Request
	topics   *[]QT // the request's list; swapped for a subset while encoding
	all      []QT
	spec     partListSpec[QT, QP, RT, RP]
	answers  []RP // item i's answer
	scratch  []QT
	scratchP []QP
	thr      int32
}

func newPartList[QT, QP, RT, RP any](req kmsg.Request, topics *[]QT, spec partListSpec[QT, QP, RT, RP]) *partList[QT, QP, RT, RP] {
	return &partList[QT, QP, RT, RP]{req: req, topics: topics, all: *topics, spec: spec}
}

func (o *partList[QT, QP, RT, RP]) start(ctx context.Context, d *Dispatcher, h Header, conn uint64, body []byte, timeoutMillis int32) {
	s := &o.s
	s.Init(&d.eng, o, split.Request{
		Key: h.Key, Version: h.Version, Conn: conn, ClientID: h.ClientID, Own: body,
		Deadline: d.budget(timeoutMillis), Hold: holdOf(o.req),
	})
	o.answers = make([]RP, split.CountParts(o.all, o.spec.parts))
	s.Reserve(len(o.answers))
	chk := offsetsCheck(ctx, d, h.Key)
	for ti := range o.all {
		t := &o.all[ti]
		ps := *o.spec.parts(t)
		for pi := range ps {
			d.addPartition(s, chk, o.spec.topic(t), [16]byte{}, false, o.spec.part(&ps[pi]), int32(ti), int32(pi))
		}
	}
	s.Dispatch(ctx, body)
}

func (o *partList[QT, QP, RT, RP]) finish(ctx context.Context) (Reply, error) {
	return answerReply(o.s.Finish(ctx))
}

func (o *partList[QT, QP, RT, RP]) Encode(dst []byte, idx []int32, _ int) []byte {
	o.scratch = split.Subset(&o.s, idx, o.all, o.spec.parts, o.scratch, &o.scratchP)
	*o.topics = o.scratch
	dst = appendAt(o.req, o.s.SubVersion(), dst)
	*o.topics = o.all
	return dst
}

// Carries is split.Bridger (bridge.go).
func (o *partList[QT, QP, RT, RP]) Carries(to int16) bool { return carries(o.req, to) }

func (o *partList[QT, QP, RT, RP]) Absorb(body []byte, si int) (bool, error) {
	resp := o.req.ResponseKind()
	resp.SetVersion(o.s.VersionOf(si))
	if err := resp.(kmsg.UnsafeReadFrom).UnsafeReadFrom(body); err != nil {
		return false, err
	}
	if t, ok := resp.(kmsg.ThrottleResponse); ok {
		thr, _ := t.Throttle()
		o.thr = max(o.thr, thr)
	}
	m := o.s.Matcher(si)
	list := *o.spec.answers(resp)
	for ti := range list {
		topic, parts := o.spec.answerOf(&list[ti])
		for pi := range parts {
			part, code := o.spec.codeOf(&parts[pi])
			if i := m.Find(topic, [16]byte{}, false, part); i >= 0 {
				o.answers[i] = parts[pi]
				o.s.Answered(i, code)
			}
		}
	}
	return true, nil
}

func (o *partList[QT, QP, RT, RP]) Fail(i int32, code int16) {
	o.answers[i] = o.spec.failed(o.s.KeyOf(i).Part, code)
}

func (o *partList[QT, QP, RT, RP]) Merge(dst []byte) []byte {
	resp := o.req.ResponseKind()
	if t, ok := resp.(kmsg.SetThrottleResponse); ok {
		t.SetThrottle(o.thr)
	}
	out := make([]RT, len(o.all))
	lo := 0
	for ti := range o.all {
		hi := lo + len(*o.spec.parts(&o.all[ti])) // items are numbered in the client's order
		out[ti] = o.spec.answer(o.spec.topic(&o.all[ti]), o.answers[lo:hi])
		lo = hi
	}
	*o.spec.answers(resp) = out
	return resp.AppendTo(dst)
}

var listOffsetsSpec = partListSpec[kmsg.ListOffsetsRequestTopic, kmsg.ListOffsetsRequestTopicPartition,
	kmsg.ListOffsetsResponseTopic, kmsg.ListOffsetsResponseTopicPartition]{
	topic: func(t *kmsg.ListOffsetsRequestTopic) string { return t.Topic },
	parts: func(t *kmsg.ListOffsetsRequestTopic) *[]kmsg.ListOffsetsRequestTopicPartition { return &t.Partitions },
	part:  func(p *kmsg.ListOffsetsRequestTopicPartition) int32 { return p.Partition },
	answers: func(r kmsg.Response) *[]kmsg.ListOffsetsResponseTopic {
		return &r.(*kmsg.ListOffsetsResponse).Topics
	},
	answerOf: func(t *kmsg.ListOffsetsResponseTopic) (string, []kmsg.ListOffsetsResponseTopicPartition) {
		return t.Topic, t.Partitions
	},
	codeOf: func(p *kmsg.ListOffsetsResponseTopicPartition) (int32, int16) { return p.Partition, p.ErrorCode },
	failed: func(part int32, code int16) kmsg.ListOffsetsResponseTopicPartition {
		p := kmsg.NewListOffsetsResponseTopicPartition()
		p.Partition, p.ErrorCode = part, code
		return p
	},
	answer: func(topic string, ps []kmsg.ListOffsetsResponseTopicPartition) kmsg.ListOffsetsResponseTopic {
		return kmsg.ListOffsetsResponseTopic{Topic: topic, Partitions: ps}
	},
}

var epochSpec = partListSpec[kmsg.OffsetForLeaderEpochRequestTopic, kmsg.OffsetForLeaderEpochRequestTopicPartition,
	kmsg.OffsetForLeaderEpochResponseTopic, kmsg.OffsetForLeaderEpochResponseTopicPartition]{
	topic: func(t *kmsg.OffsetForLeaderEpochRequestTopic) string { return t.Topic },
	parts: func(t *kmsg.OffsetForLeaderEpochRequestTopic) *[]kmsg.OffsetForLeaderEpochRequestTopicPartition {
		return &t.Partitions
	},
	part: func(p *kmsg.OffsetForLeaderEpochRequestTopicPartition) int32 { return p.Partition },
	answers: func(r kmsg.Response) *[]kmsg.OffsetForLeaderEpochResponseTopic {
		return &r.(*kmsg.OffsetForLeaderEpochResponse).Topics
	},
	answerOf: func(t *kmsg.OffsetForLeaderEpochResponseTopic) (string, []kmsg.OffsetForLeaderEpochResponseTopicPartition) {
		return t.Topic, t.Partitions
	},
	codeOf: func(p *kmsg.OffsetForLeaderEpochResponseTopicPartition) (int32, int16) {
		return p.Partition, p.ErrorCode
	},
	failed: func(part int32, code int16) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
		p.Partition, p.ErrorCode, p.LeaderEpoch, p.EndOffset = part, code, -1, -1
		return p
	},
	answer: func(topic string, ps []kmsg.OffsetForLeaderEpochResponseTopicPartition) kmsg.OffsetForLeaderEpochResponseTopic {
		return kmsg.OffsetForLeaderEpochResponseTopic{Topic: topic, Partitions: ps}
	},
}

var deleteRecordsSpec = partListSpec[kmsg.DeleteRecordsRequestTopic, kmsg.DeleteRecordsRequestTopicPartition,
	kmsg.DeleteRecordsResponseTopic, kmsg.DeleteRecordsResponseTopicPartition]{
	topic: func(t *kmsg.DeleteRecordsRequestTopic) string { return t.Topic },
	parts: func(t *kmsg.DeleteRecordsRequestTopic) *[]kmsg.DeleteRecordsRequestTopicPartition {
		return &t.Partitions
	},
	part: func(p *kmsg.DeleteRecordsRequestTopicPartition) int32 { return p.Partition },
	answers: func(r kmsg.Response) *[]kmsg.DeleteRecordsResponseTopic {
		return &r.(*kmsg.DeleteRecordsResponse).Topics
	},
	answerOf: func(t *kmsg.DeleteRecordsResponseTopic) (string, []kmsg.DeleteRecordsResponseTopicPartition) {
		return t.Topic, t.Partitions
	},
	codeOf: func(p *kmsg.DeleteRecordsResponseTopicPartition) (int32, int16) { return p.Partition, p.ErrorCode },
	failed: func(part int32, code int16) kmsg.DeleteRecordsResponseTopicPartition {
		p := kmsg.NewDeleteRecordsResponseTopicPartition()
		p.Partition, p.ErrorCode, p.LowWatermark = part, code, -1
		return p
	},
	answer: func(topic string, ps []kmsg.DeleteRecordsResponseTopicPartition) kmsg.DeleteRecordsResponseTopic {
		return kmsg.DeleteRecordsResponseTopic{Topic: topic, Partitions: ps}
	},
}

// topicIDs maps topic IDs (Produce v13+, Fetch v13+) to names. The routing
// table is keyed by name, so the index is rebuilt from it, but only when a
// lookup misses or finds a stale entry after a routing change: ownership
// changes, which are frequent, leave the index alone.
type topicIDs struct {
	cur atomic.Pointer[idIndex]
	mu  sync.Mutex // serializes rebuilds
}

type idIndex struct {
	changed <-chan struct{}
	byID    map[[16]byte]string
}

func (x *topicIDs) name(routes *routing.Table, id [16]byte) (string, bool) {
	ix := x.cur.Load()
	if ix != nil {
		name, ok := ix.byID[id]
		if !closed(ix.changed) {
			return name, ok
		}
		// The table changed since the index was built; the entry is still
		// right if routing agrees.
		if ok {
			if t, known := routes.Topic(name); known && t.ID == id {
				return name, true
			}
		}
	}
	ix = x.rebuild(routes, ix)
	name, ok := ix.byID[id]
	return name, ok
}

func (x *topicIDs) rebuild(routes *routing.Table, seen *idIndex) *idIndex {
	x.mu.Lock()
	defer x.mu.Unlock()
	if ix := x.cur.Load(); ix != seen && ix != nil && !closed(ix.changed) {
		return ix // another caller rebuilt meanwhile
	}
	ix := &idIndex{changed: routes.Changed()}
	topics := routes.Topics()
	ix.byID = make(map[[16]byte]string, len(topics))
	for _, t := range topics {
		if t.ID != ([16]byte{}) {
			ix.byID[t.ID] = t.Name
		}
	}
	x.cur.Store(ix)
	return ix
}

// addPartition resolves one partition of a client request (by topic id
// when byID) and adds it to s: answered locally when chk denies the topic
// (before its existence is told, as Kafka does) or with the unknown-topic
// code when it does not exist, routed otherwise.
func (d *Dispatcher) addPartition(s *split.Engine, chk *authrule.TopicCheck, name string, id [16]byte, byID bool, part, ti, pi int32) {
	n, rid, code := d.partRoute(chk, name, id, byID, part)
	if code != 0 {
		s.AddLocal(n, id, part, ti, pi, code)
		return
	}
	s.Add(n, rid, part, ti, pi)
}

// partRoute resolves a partition of a request: the topic's name and the id
// to route it by, or the code the proxy answers it with itself (unknown or
// denied; the name is then the one the request gave when its id is unknown).
func (d *Dispatcher) partRoute(chk *authrule.TopicCheck, name string, id [16]byte, byID bool, part int32) (string, [16]byte, int16) {
	unknown := kerr.UnknownTopicOrPartition.Code
	if byID {
		unknown = kerr.UnknownTopicID.Code
		n, ok := d.ids.name(d.routes, id)
		if !ok {
			return name, id, unknown
		}
		name = n
	}
	if code := chk.Denied(name); code != 0 {
		return name, id, code
	}
	t, ok := d.routes.Topic(name)
	if !ok || part < 0 || part >= t.Partitions {
		if ok {
			unknown = kerr.UnknownTopicOrPartition.Code
		}
		return name, id, unknown
	}
	return name, t.ID, 0
}
