package split

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/proxy/zone"
	"github.com/kproxy/kproxy/retry"
	"github.com/kproxy/kproxy/routing"
)

const (
	itemIdle   uint8 = iota // to be routed and sent
	itemSent                // an attempt is in flight
	itemRetry               // refused; waits for its retry
	itemDone                // answered, by a broker or locally
	itemBehind              // waits for an earlier item of its line (order.go)
)

type item struct {
	Key
	broker int32         // broker of the current attempt
	avoid  routing.Avoid // brokers that refused this item so far
	tries  int32         // attempts sent
	state  uint8
	filled bool   // the Adapter holds an answer for it
	mark   uint32 // absorb pass that matched the item
	due    time.Time
	line   *line // its line while in one (order.go); guarded by the lines' mutex
	gaveUp bool  // the proxy answered it unwritten, or maybe unwritten (order.go)
}

const (
	subSent    uint8 = iota // sent; nobody waits yet
	subWaiting              // a goroutine waits for it
	subDone                 // handled
)

type sub struct {
	broker  int32
	version int16 // the version it was sent at (see Bridger)
	idx     []int32
	p       upstream.Pending
	err     error // Send failed
	state   uint8
	held    bool      // its answer was absorbed: item answers may reference it
	lp      *longPoll // the wait of a subWaiting sub
	first   bool      // of the first round: its long poll may be parked
	local   string    // zone.Locality of the broker to the client
}

type result struct {
	si   int
	body []byte
	err  error
}

// Engine is one client request in the split engine; an adapter embeds
// it (see contract.go). The zero value is ready for Init.
type Engine struct {
	env      *Env
	ops      Adapter
	poller   LongPoller  // ops, if it is one
	merger   PartsMerger // ops, if it is one
	vec      VecAdapter  // ops, if it is one
	key      int16
	version  int16
	subVer   int16 // version of the sub-request being encoded (SubVersion)
	conn     uint64
	clientID *string // the client's, forwarded in sub-requests
	routeBy  RouteBy // how items are routed
	rack     string  // the client's rack, as its request names it
	zone     string  // the client's zone, once zoned
	zsrc     zone.Source
	zoned    bool // zone and zsrc are known
	whole    bool // one item, forwarded whole : not counted as split
	perItem  bool // a sub-request per item (Request.PerItem)
	readOnly bool // a maybe-processed attempt may be repeated
	// concurrent waits for all brokers at once (goroutines), so that a
	// LongPoller can answer early; otherwise answers are awaited in turn,
	// which costs no goroutine (every attempt is in flight anyway).
	concurrent bool
	ambCode    int16         // answer for items whose attempt may have been processed
	lostCode   int16         // answer for items whose retries ran out unanswered
	noRoute    int16         // answer for items no live broker can take
	hold       upstream.Hold // of every sub-request, from the decoded request

	items []item
	subs  []sub
	idx   []int32 // backing store of sub.idx
	own   []byte  // the client's request body (valid until Finish returns), if kept
	enc   subBody // the sub-request being sent (Send does not keep it)

	deadline    time.Time // retries end here
	start       time.Time // first attempt sent
	grace       time.Time // enough is in hand: answer by then (see graceFor)
	raw         []byte    // broker answer the client may get unchanged
	answerBytes int       // bytes of broker answers absorbed
	retries     int       // items in itemRetry
	outstanding int       // subs not yet handled
	waiting     int       // subs handed to goroutines
	seq         uint32
	retrying    bool // dispatching retries (no parked long poll fits)
	results     chan result

	ordered bool          // items keep their line's order (order.go)
	lines   *connLines    // the connection's lines, once an ordered Dispatch ran
	behind  int           // items in itemBehind
	wake    chan struct{} // an earlier item of a line moved: look again
}

// Reset empties s for reuse by a pooled Adapter, keeping its capacity and
// dropping references to answers.
func (s *Engine) Reset() {
	clear(s.items)
	clear(s.subs)
	*s = Engine{items: s.items[:0], subs: s.subs[:0], idx: s.idx[:0], results: s.results, wake: s.wake}
}

// Init starts s for the request r that adapter a decoded; items are added
// next, then Dispatch sends the first attempts.
func (s *Engine) Init(env *Env, a Adapter, r Request) {
	s.env, s.ops, s.key, s.version, s.conn, s.clientID = env, a, r.Key, r.Version, r.Conn, r.ClientID
	s.subVer = r.Version
	s.own, s.deadline, s.hold, s.routeBy, s.whole, s.perItem = r.Own, r.Deadline, r.Hold, r.RouteBy, r.Whole, r.PerItem
	s.rack = r.Rack
	s.poller, _ = a.(LongPoller)
	s.merger, _ = a.(PartsMerger)
	s.vec, _ = a.(VecAdapter)
	s.concurrent = s.poller != nil
	s.readOnly = env.Repeatable != nil && env.Repeatable(r.Key)
	s.ambCode = kerr.RequestTimedOut.Code
	s.lostCode = cmp.Or(r.LostCode, kerr.NotLeaderForPartition.Code)
	s.noRoute = cmp.Or(r.NoRoute, kerr.LeaderNotAvailable.Code)
	s.ordered = r.Ordered
	if s.ordered && s.wake == nil {
		s.wake = make(chan struct{}, 1)
	}
}

// Key is the API key of the request; Version its version.
func (s *Engine) Key() int16     { return s.key }
func (s *Engine) Version() int16 { return s.version }

// Own is the client's request body.
func (s *Engine) Own() []byte { return s.own }

// Deadline is when retries end.
func (s *Engine) Deadline() time.Time { return s.deadline }

func (s *Engine) route(it *item) (int32, bool) {
	switch s.routeBy {
	case ByGroup:
		return s.env.Routes.RouteGroupAvoiding(it.Topic, it.avoid)
	case ByAnyBroker:
		return s.env.Routes.AnyBrokerAvoiding(it.Topic, it.avoid)
	case ByBroker:
		_, live := s.env.Routes.Broker(it.Part)
		return it.Part, live
	case ByPartitionWrite:
		return s.env.Routes.RouteWrite(it.Topic, it.Part, s.zone, it.avoid)
	case ByPartitionRead:
		b, why, ok := s.env.Routes.RouteRead(it.Topic, it.Part, s.zone, it.avoid)
		if ok {
			s.env.Metrics.Read(why, s.zsrc)
		}
		return b, ok
	}
	return s.env.Routes.RouteAvoiding(it.Topic, it.Part, it.avoid)
}

// Dispatch routes the idle items and sends one sub-request per broker.
// whole, if not nil, is the client's encoded request: when every item is
// idle and goes to one broker it is forwarded as it is.
func (s *Engine) Dispatch(ctx context.Context, whole []byte) {
	s.findZone(ctx)
	if s.ordered {
		s.lockLines(ctx)
		defer s.unlockLines()
	}
	var brokers [8]int32
	distinct := brokers[:0]
	idle := 0
	for i := range s.items {
		it := &s.items[i]
		if it.state != itemIdle {
			continue
		}
		b, ok := s.route(it)
		if !ok {
			s.done(int32(i), s.noRoute)
			continue
		}
		if s.ordered && !s.admit(int32(i), b) {
			continue
		}
		it.broker = b
		idle++
		if !containsID(distinct, b) {
			distinct = append(distinct, b)
		}
	}
	if idle == 0 {
		return
	}
	if whole != nil && (len(distinct) != 1 || idle != len(s.items)) {
		whole = nil
	}
	first := len(s.subs) == 0
	if first {
		s.start = s.env.Now()
	}
	s.retrying = !first
	s.idx = slices.Grow(s.idx, idle)
	if s.perItem {
		s.dispatchPerItem(ctx, whole)
	} else {
		for _, b := range distinct {
			start := len(s.idx)
			for i := range s.items {
				if it := &s.items[i]; it.state == itemIdle && it.broker == b {
					s.idx = append(s.idx, int32(i))
					it.state = itemSent
					it.tries++
				}
			}
			s.send(ctx, b, s.idx[start:len(s.idx):len(s.idx)], whole, len(distinct), s.conn)
		}
	}
	if first && !s.whole {
		s.env.Metrics.Split(s.key, len(distinct))
	}
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func (s *Engine) send(ctx context.Context, broker int32, idx []int32, whole []byte, nsubs int, aff uint64) {
	ver, ok := s.brokerVersion(broker)
	if !ok {
		s.unbridgeable(broker, ver, idx)
		return
	}
	if ver != s.version {
		whole = nil // the client's bytes are at the client's version
	}
	s.subVer = ver
	parkable := s.poller != nil && !s.retrying
	if parkable && s.adopt(broker, idx) {
		return
	}
	var body upstream.Body = upstream.Raw(whole)
	sent := len(whole)
	if whole == nil || s.vec != nil {
		s.enc = subBody{s: s, idx: idx, nsubs: nsubs, whole: whole}
		body = &s.enc
	}
	p, err := s.env.Sender.Send(ctx, broker, aff, upstream.Request{
		Key: s.key, Version: ver, ClientID: s.clientID, Body: body, Hold: s.holdNow(),
	})
	if body == &s.enc {
		sent = s.enc.sent
	}
	s.enc = subBody{}
	local := s.locality(broker)
	if err != nil {
		err = fmt.Errorf("send %s to broker %d: %w", kmsg.NameForKey(s.key), broker, err)
		if s.ordered {
			s.lines.unsentLocked(s, idx)
		}
	} else {
		s.env.Metrics.Upstream(s.key, local, sent)
	}
	s.subs = append(s.subs, sub{broker: broker, version: ver, idx: idx, p: p, err: err, first: parkable, local: local})
	s.outstanding++
}

// holdNow is the Hold of the sub-request about to be sent: a fetch's
// retries wait only for what is left of MaxWait.
func (s *Engine) holdNow() upstream.Hold {
	if s.poller != nil {
		return s.poller.Hold()
	}
	return s.hold
}

// adopt waits for the connection's parked long poll to broker instead of
// sending a new sub-request, if that poll asks for the same.
func (s *Engine) adopt(broker int32, idx []int32) bool {
	k := parkKey{conn: s.conn, broker: broker}
	if !s.env.parked.has(k) { // the common case: no signature to compute
		return false
	}
	lp := s.env.parked.adopt(k, s.poller.Signature(nil, idx))
	if lp == nil {
		return false
	}
	s.ensureResults()
	si := len(s.subs)
	s.subs = append(s.subs, sub{broker: broker, version: s.subVer, idx: idx, state: subWaiting, lp: lp, first: true,
		local: s.locality(broker)})
	s.outstanding++
	s.waiting++
	lp.attach(s.results, si)
	return true
}

// Finish waits for the answers, retrying as needed, and has the adapter
// merge them. An error means ctx ended.
func (s *Engine) Finish(ctx context.Context) (Answer, error) {
	defer s.cleanup(ctx)
	if err := s.loop(ctx); err != nil {
		return Answer{}, err
	}
	if s.raw != nil {
		s.subs[0].held = false // see afterAbsorb: the only sub, with a upstream.Pending
		return Answer{Body: s.raw, Release: s.subs[0].p.Release}, nil
	}
	if s.merger != nil {
		buf, parts, ok := s.merger.MergeParts()
		skel := *buf
		if ok && parts != nil {
			return Answer{Parts: parts, Release: s.releaseLater(buf)}, nil
		}
		if ok { // nothing large: skel is the answer
			s.releaseAnswers()
			return Answer{Body: skel, Release: s.releaseLater(buf)}, nil
		}
		s.env.putBuf(buf)
	}
	// The answer is about as large as the broker answers it merges.
	buf := s.env.getBuf(s.answerBytes + 64*len(s.items) + 256)
	*buf = s.ops.Merge(*buf)
	s.releaseAnswers()
	return Answer{Body: *buf, Release: s.releaseLater(buf)}, nil
}

func (s *Engine) handleSendErrors() {
	for si := range s.subs {
		if sb := &s.subs[si]; sb.state == subSent && sb.err != nil {
			s.handle(si, nil, sb.err)
		}
	}
}

// handle takes one sub-request's outcome.
func (s *Engine) handle(si int, body []byte, err error) {
	s.take(si, body, err)
	if s.ordered {
		s.syncLines(s.subs[si].idx)
	}
}

func (s *Engine) take(si int, body []byte, err error) {
	sb := &s.subs[si]
	sb.state = subDone
	s.outstanding--
	if err == nil {
		s.seq++
		sb.held = true
		s.answerBytes += len(body)
		s.env.Metrics.Upstream(s.key, sb.local, len(body))
		clean, derr := s.ops.Absorb(body, si)
		if derr == nil {
			s.afterAbsorb(si, body, clean)
			return
		}
		// A garbled answer: the broker may have processed the request.
		err = fmt.Errorf("decode %s answer from broker %d: %w", kmsg.NameForKey(s.key), sb.broker, derr)
	}
	cls := retry.ClassifyErr(err)
	if cls == retry.Ambiguous && s.readOnly {
		cls = retry.Definite
	}
	s.env.Log.Debug("sub-request failed", "api", kmsg.NameForKey(s.key), "broker", sb.broker, "class", cls, "err", err)
	for _, i := range sb.idx {
		if s.items[i].state != itemSent {
			continue
		}
		if cls == retry.Definite {
			s.refused(i, 0, err)
		} else {
			s.done(i, s.ambCode)
		}
	}
}

func (s *Engine) afterAbsorb(si int, body []byte, clean bool) {
	sb := &s.subs[si]
	missing := false
	for _, i := range sb.idx {
		if s.items[i].state == itemSent && s.items[i].mark != s.seq {
			missing = true
		}
	}
	if missing {
		s.subs[si].state = subSent // handle counts it once more
		s.outstanding++
		s.take(si, nil, fmt.Errorf("broker %d left partitions out of its %s answer", sb.broker, kmsg.NameForKey(s.key)))
		return
	}
	// An adopted long poll (no p) asked with an earlier request's
	// partition order: its answer is merged in the client's order.
	if !clean || si != 0 || len(s.subs) != 1 || len(sb.idx) != len(s.items) || sb.p == nil || sb.version != s.version {
		return
	}
	for i := range s.items {
		if s.items[i].state != itemDone {
			return
		}
	}
	s.raw = body
}

// Answered records a broker's answer to item i (already stored by the
// Adapter) with code.
func (s *Engine) Answered(i int32, code int16) {
	it := &s.items[i]
	it.filled = true
	it.mark = s.seq
	if retry.Classify(code, s.readOnly) == retry.Definite && s.refused(i, code, nil) {
		return
	}
	if code == kerr.OutOfOrderSequenceNumber.Code && s.ordered && s.tooEarly(i, code) {
		return
	}
	it.state = itemDone
}

// done answers item i locally with code.
func (s *Engine) done(i int32, code int16) {
	it := &s.items[i]
	it.state = itemDone
	it.filled = true
	it.gaveUp = true
	s.ops.Fail(i, code)
}

// refused schedules a retry of item i; false when retries ran out, in
// which case the item is done with its last answer (or lostCode).
func (s *Engine) refused(i int32, code int16, err error) bool {
	it := &s.items[i]
	now := s.env.Now()
	delay, ok := s.env.Backoff(int(it.tries), s.deadline)
	if !ok {
		it.state, it.gaveUp = itemDone, true
		if !it.filled {
			s.done(i, s.lostCode)
		}
		return false
	}
	it.avoid.Add(it.broker)
	if s.ownerMoved(it) {
		delay = 0
	}
	it.state = itemRetry
	it.due = now.Add(delay)
	s.retries++
	s.env.Metrics.Retried(s.key, code, err)
	return true
}

// ownerMoved says whether routing already names a live owner that has not
// refused this item, so the retry need not wait.
func (s *Engine) ownerMoved(it *item) bool {
	switch s.routeBy {
	case ByGroup:
		b, owned := s.env.Routes.Coordinator(it.Topic)
		return owned && !it.avoid.Has(b)
	case ByPartition, ByPartitionRead, ByPartitionWrite:
		b, _, owned := s.env.Routes.Owner(it.Topic, it.Part)
		return owned && !it.avoid.Has(b)
	}
	return false
}
