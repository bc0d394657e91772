package apis

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/authrule"
	"github.com/kproxy/kproxy/proxy/apis/fetchwait"
	"github.com/kproxy/kproxy/proxy/apis/split"
	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/retry"
)

// fetchOp splits a Fetch by partition owner.
//
// Sessions: clients see sessionless fetches. A fetch session (KIP-227)
// belongs to one client-broker connection, so brokers always get session
// id 0 and epoch -1 (a full fetch that opens no session), forgotten topics
// are ignored (every request lists all partitions the client wants), and
// the client always gets session id 0, which tells it to keep sending full
// fetches.
//
// Early answers: once the answers in hand hold MinBytes of records, the
// other brokers get a short grace to answer too (graceFor: brokers with
// data answer about as fast as the first did), then the client gets what
// is there, without waiting for brokers that still long-poll. Their
// fetches are abandoned (reads have no effect, nothing is lost) and their
// partitions are left out of the answer rather than answered empty: kgo,
// librdkafka, kafka-go and sarama (v1.61 skips partitions missing from a
// response) simply fetch them again (TestKgoKeepsConsuming), while an
// invented empty answer would need a high watermark the proxy does not
// have (a guess makes librdkafka report a false end of partition, and lag
// go wrong).
//
// High watermarks: with zone reads, a partition may be answered by a
// broker that learns of commits through its etcd watch, whose watermark
// trails the owner's; each answer is raised to the highest watermark the
// proxy passed on for that partition before (package hwfloor), so a client
// whose fetches move between brokers never sees it go down.
//
// Errors alone do not end the wait early: a partition that keeps failing
// (an unknown topic, say) would otherwise cut off every other broker's
// answer, each time, and starve the healthy partitions. Errors go out with
// the other answers, within MaxWait.
//
// The proxy never abandons a broker because of time: brokers answer by
// MaxWait themselves, and one that is slow to read from the object store
// must not be cut off every time (the client would re-fetch forever).
type fetchOp struct {
	d   *Dispatcher
	ep  endpoint // the client's listener's advertised address (leader hints)
	s   split.Engine
	req kmsg.FetchRequest

	enc      kmsg.FetchRequest
	encParts []kmsg.FetchRequestTopicPartition
	dec      kmsg.FetchResponse // scratch for broker answers
	out      kmsg.FetchResponse // scratch for the answer
	vec      vecEncoder
	answers  []kmsg.FetchResponseTopicPartition
	tstart   []int32
	throttle int32
	hints    bool
	byID     bool
	bytes    int // record bytes in the answers so far
	inline   int // of which in record sets small enough to stay inline (vecMinBytes)
	// ctx is the client request's, for the KMS calls of decryption
	// (decryptRecords), which Absorb has no context for.
	ctx context.Context
}

func (d *Dispatcher) beginFetch(ctx context.Context, conn uint64, h Header, body []byte) (op, Reply, error) {
	o, _ := d.fetchPool.Get().(*fetchOp)
	if o == nil {
		o = &fetchOp{}
	}
	o.d, o.ep, o.ctx = d, d.endpoint(ctx), ctx
	o.req = kmsg.FetchRequest{Version: h.Version, Topics: o.req.Topics} // reuse, but no stale fields
	// kmsg's defaults for fields a version may not carry: without them a
	// v15+ consumer's fetch would read as replica 0's.
	o.req.ReplicaID, o.req.ReplicaState.ID, o.req.ReplicaState.Epoch = -1, -1, -1
	if err := o.req.UnsafeReadFrom(body); err != nil {
		o.release()
		return nil, Reply{}, fmt.Errorf("decode: %w", err)
	}
	o.byID = h.Version >= 13
	o.s.Init(&d.eng, o, split.Request{
		Key: h.Key, Version: h.Version, Conn: conn, ClientID: h.ClientID, Own: body,
		Deadline: retry.Budget(d.now(), time.Duration(o.req.MaxWaitMillis)*time.Millisecond, 0),
		RouteBy:  split.ByPartitionRead, Rack: o.req.Rack, // reads may stay in the client's zone
	})
	n := split.CountParts(o.req.Topics, fetchParts)
	o.answers = slices.Grow(o.answers[:0], n)[:n]
	o.s.Reserve(n)
	o.tstart = split.TopicStarts(o.tstart, o.req.Topics, fetchParts)
	chk := fetchCheck(ctx, d, &o.req)
	for ti := range o.req.Topics {
		t := &o.req.Topics[ti]
		for pi := range t.Partitions {
			d.addPartition(&o.s, chk, t.Topic, t.TopicID, o.byID, t.Partitions[pi].Partition, int32(ti), int32(pi))
		}
	}
	var whole []byte
	if !d.cfg.PerPartitionFetchWait && (h.Version < 7 || (o.req.SessionID == 0 && o.req.SessionEpoch == -1 && len(o.req.ForgottenTopics) == 0)) {
		whole = body // already sessionless, and its MaxWait needs no shaping
	}
	o.s.Dispatch(ctx, whole)
	return o, Reply{}, nil
}

// fetchCheck is Kafka's: Read on each topic for a consumer; a follower
// (a replica id) needs ClusterAction, or every partition is refused.
func fetchCheck(ctx context.Context, d *Dispatcher, req *kmsg.FetchRequest) *authrule.TopicCheck {
	chk := d.topicCheck(ctx, int16(kmsg.Fetch))
	follower := req.ReplicaID >= 0 || req.ReplicaState.ID >= 0
	if follower && chk.Guard().On() && !chk.Guard().Cluster(kmsg.ACLOperationClusterAction) {
		chk.RefuseAll(kerr.TopicAuthorizationFailed.Code)
	}
	return chk
}

func (o *fetchOp) finish(ctx context.Context) (Reply, error) {
	r, err := answerReply(o.s.Finish(ctx))
	o.release()
	return r, err
}

// release returns o to the pool once its answer is encoded.
func (o *fetchOp) release() {
	d := o.d
	o.s.Reset()
	clear(o.answers)
	clear(o.out.Topics[:cap(o.out.Topics)])
	o.throttle, o.hints, o.byID, o.bytes, o.inline, o.ctx = 0, false, false, 0, 0, nil
	d.fetchPool.Put(o)
}

func (o *fetchOp) Encode(dst []byte, idx []int32, nsubs int) []byte {
	e := &o.enc
	r := &o.req
	*e = kmsg.FetchRequest{
		Version: o.s.SubVersion(), ClusterID: r.ClusterID, ReplicaID: r.ReplicaID, ReplicaState: r.ReplicaState,
		MaxWaitMillis: r.MaxWaitMillis, MinBytes: r.MinBytes, MaxBytes: r.MaxBytes,
		IsolationLevel: r.IsolationLevel, SessionID: 0, SessionEpoch: -1, Rack: r.Rack,
		UnknownTags: r.UnknownTags, Topics: e.Topics[:0],
	}
	e.MaxWaitMillis = o.subWait(idx)
	if nsubs > 1 && e.MaxBytes > 0 {
		// The merged answer must stay within the client's limit (librdkafka
		// drops a connection whose response exceeds its receive limit).
		e.MaxBytes = int32((int64(e.MaxBytes) + int64(nsubs) - 1) / int64(nsubs))
	}
	e.Topics = split.Subset(&o.s, idx, r.Topics, fetchParts, e.Topics, &o.encParts)
	return e.AppendTo(dst)
}

// Hold is the Hold of the sub-request being sent (split.LongPoller).
func (o *fetchOp) Hold() upstream.Hold { return fetchHold(o.maxWait()) }

// maxWait is the MaxWait of the sub-request being sent: the client's, or,
// for a retry, what is left of it.
func (o *fetchOp) maxWait() int32 {
	if o.s.FirstRound() {
		return o.req.MaxWaitMillis
	}
	return int32(max(0, o.s.Deadline().Sub(o.d.now()).Milliseconds()))
}

// subWait is the MaxWait of the sub-request for items idx: the client's
// (maxWait), or, to brokers that wait per partition, package fetchwait's.
func (o *fetchOp) subWait(idx []int32) int32 {
	w := o.maxWait()
	if !o.d.cfg.PerPartitionFetchWait {
		return w
	}
	return fetchwait.SubWait(w, o.req.MinBytes, len(idx), o.knownData(idx))
}

// knownData says whether a partition of items idx has records at its
// fetch offset: below the highest watermark passed on for it (KafScale's
// watermarks never go down).
func (o *fetchOp) knownData(idx []int32) bool {
	for _, i := range idx {
		k := o.s.KeyOf(i)
		if o.d.floors.Floor(k.ID, k.Part) > o.req.Topics[k.TI].Partitions[k.PI].FetchOffset {
			return true
		}
	}
	return false
}

// noteWatermark records a broker's watermark for item i, for knownData
// (zone reads raise it in Absorb already).
func (o *fetchOp) noteWatermark(i int32, p *kmsg.FetchResponseTopicPartition) {
	if o.d.cfg.PerPartitionFetchWait && p.ErrorCode == 0 {
		k := o.s.KeyOf(i)
		o.d.floors.Raise(k.ID, k.Part, p.HighWatermark)
	}
}

func fetchParts(t *kmsg.FetchRequestTopic) *[]kmsg.FetchRequestTopicPartition { return &t.Partitions }

func (o *fetchOp) Absorb(body []byte, si int) (bool, error) {
	o.dec = kmsg.FetchResponse{Version: o.s.VersionOf(si), Topics: o.dec.Topics} // see produceOp.absorb
	r := &o.dec
	if err := r.UnsafeReadFrom(body); err != nil {
		return false, err
	}
	o.throttle = max(o.throttle, r.ThrottleMillis)
	clean := len(r.Brokers) == 0 && r.SessionID == 0 && r.ErrorCode == 0
	if r.ErrorCode != 0 {
		// A request-level error (there should be none without sessions)
		// answers every partition of this sub-request.
		o.s.AnsweredAll(si, r.ErrorCode, func(i int32) { o.answers[i] = errorPartition(o.s.KeyOf(i).Part, r.ErrorCode) })
		return false, nil
	}
	m := o.s.Matcher(si)
	nodeID := o.d.cfg.NodeID
	floors := o.d.routes.ZoneReads() // see hwfloor: answers of brokers that may trail
	for ti := range r.Topics {
		t := &r.Topics[ti]
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			i := m.Find(t.Topic, t.TopicID, o.byID, p.Partition)
			if i < 0 {
				continue
			}
			if p.CurrentLeader.LeaderID >= 0 && p.CurrentLeader.LeaderID != nodeID {
				p.CurrentLeader.LeaderID = nodeID
				o.hints, clean = true, false
			}
			if p.PreferredReadReplica >= 0 {
				p.PreferredReadReplica = -1 // never send clients to a broker
				clean = false
			}
			if p.RecordBatches == nil {
				// Null records are legal in the schema, but librdkafka
				// fails the whole response on them ("invalid
				// MessageSetSize -1"); Kafka always sends empty ones.
				p.RecordBatches = noRecords
				clean = false
			}
			if floors && p.ErrorCode == 0 {
				k := o.s.KeyOf(i)
				if hwm := o.d.floors.Raise(k.ID, k.Part, p.HighWatermark); hwm != p.HighWatermark {
					p.HighWatermark, clean = hwm, false
					o.d.m.floorRaised.Inc()
				}
			}
			if o.decryptRecords(i, p) {
				clean = false
			}
			o.noteWatermark(i, p)
			o.answers[i] = *p
			o.bytes += len(p.RecordBatches)
			if len(p.RecordBatches) < vecMinBytes {
				o.inline += len(p.RecordBatches)
			}
			o.s.Answered(i, p.ErrorCode)
		}
	}
	return clean, nil
}

// Carries is split.Bridger (bridge.go).
func (o *fetchOp) Carries(to int16) bool { return carries(&o.req, to) }

func (o *fetchOp) Fail(i int32, code int16) {
	o.answers[i] = errorPartition(o.s.KeyOf(i).Part, code)
}

func errorPartition(part int32, code int16) kmsg.FetchResponseTopicPartition {
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition = part
	p.ErrorCode = code
	p.HighWatermark = -1
	p.PreferredReadReplica = -1
	p.RecordBatches = noRecords
	return p
}

// noRecords encodes as empty, not null, records (shared: only read).
var noRecords = []byte{}

// signature identifies a first-round sub-request by what the broker's
// answer depends on: the request's limits and, in a fixed order, each
// partition's fetch position (clients rotate partitions between fetches).
func (o *fetchOp) Signature(dst []byte, idx []int32) []byte {
	r := &o.req
	dst = binary.BigEndian.AppendUint16(dst, uint16(r.Version))
	for _, v := range []int32{r.MaxWaitMillis, r.MinBytes, r.MaxBytes, int32(r.IsolationLevel), r.ReplicaID} {
		dst = binary.BigEndian.AppendUint32(dst, uint32(v))
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Rack)))
	dst = append(dst, r.Rack...)
	sorted := slices.Clone(idx)
	slices.SortFunc(sorted, func(a, b int32) int {
		x, y := o.s.KeyOf(a), o.s.KeyOf(b)
		if c := strings.Compare(x.Topic, y.Topic); c != 0 {
			return c
		}
		if c := bytes.Compare(x.ID[:], y.ID[:]); c != 0 {
			return c
		}
		return cmp.Compare(x.Part, y.Part)
	})
	for _, i := range sorted {
		it := o.s.KeyOf(i)
		p := &r.Topics[it.TI].Partitions[it.PI]
		dst = binary.AppendUvarint(dst, uint64(len(it.Topic)))
		dst = append(dst, it.Topic...)
		dst = append(dst, it.ID[:]...)
		for _, v := range []int64{int64(p.Partition), int64(p.CurrentLeaderEpoch), p.FetchOffset, int64(p.LastFetchedEpoch), p.LogStartOffset, int64(p.PartitionMaxBytes)} {
			dst = binary.AppendVarint(dst, v)
		}
	}
	return dst
}

func (o *fetchOp) Enough() bool {
	return o.bytes > 0 && o.bytes >= int(o.req.MinBytes)
}

// response builds the answer from every partition that has a final
// answer, in the client's order; partitions still in flight or waiting for
// a retry are left out.
func (o *fetchOp) response() *kmsg.FetchResponse {
	resp := &o.out
	*resp = kmsg.FetchResponse{Version: o.s.Version(), ThrottleMillis: o.throttle, Topics: resp.Topics[:0]}
	for ti := range o.req.Topics {
		t := &o.req.Topics[ti]
		lo, hi := o.tstart[ti], o.tstart[ti+1]
		parts := o.answers[lo:hi]
		if !o.allDone(lo, hi) {
			parts = nil
			for i := lo; i < hi; i++ {
				if o.s.Settled(i) {
					parts = append(parts, o.answers[i])
				}
			}
		}
		if len(parts) > 0 {
			resp.Topics = append(resp.Topics, kmsg.FetchResponseTopic{Topic: t.Topic, TopicID: t.TopicID, Partitions: parts})
		}
	}
	if o.hints && o.s.Version() >= 16 && slices.ContainsFunc(o.answers, func(p kmsg.FetchResponseTopicPartition) bool { return p.CurrentLeader.LeaderID >= 0 }) {
		d := o.d // the hint's endpoint: the proxy
		resp.Brokers = []kmsg.FetchResponseBroker{{NodeID: d.cfg.NodeID, Host: o.ep.host, Port: o.ep.port}}
	}
	return resp
}

func (o *fetchOp) Merge(dst []byte) []byte { return o.response().AppendTo(dst) }

// mergeParts encodes the answer in pieces that leave large record sets in
// the brokers' frames (see vecEncoder).
func (o *fetchOp) MergeParts() (skel *[]byte, parts [][]byte, ok bool) {
	o.vec.secret = o.d.secret
	skel = o.d.getBuf(o.inline + 64*len(o.answers) + 256)
	*skel, parts, ok = o.vec.encodeFetch(o.response(), *skel)
	return skel, parts, ok
}

func (o *fetchOp) allDone(lo, hi int32) bool {
	for i := lo; i < hi; i++ {
		if !o.s.Settled(i) {
			return false
		}
	}
	return true
}

// decryptRecords decrypts the records of item i's answer p if its topic
// is encrypted. A partition that cannot be decrypted gets the code crypt
// chose and no records: nothing undecrypted reaches the client, and its
// other partitions are served. It reports whether it changed p.
func (o *fetchOp) decryptRecords(i int32, p *kmsg.FetchResponseTopicPartition) bool {
	c := o.d.cfg.Encryption
	if c == nil || p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		return false
	}
	topic := o.s.KeyOf(i).Topic
	if !c.Encrypted(topic) {
		return false
	}
	out, code := c.Decrypt(o.ctx, topic, p.Partition, p.RecordBatches)
	if code != 0 {
		p.ErrorCode, p.RecordBatches = code, noRecords
		return true
	}
	p.RecordBatches = out
	return true
}
