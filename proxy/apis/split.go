package apis

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/retry"
	"github.com/kproxy/kproxy/routing"
)

const (
	itemIdle  uint8 = iota // to be routed and sent
	itemSent               // an attempt is in flight
	itemRetry              // refused; waits for its retry
	itemDone               // answered, by a broker or locally
)

type item struct {
	itemKey
	broker int32         // broker of the current attempt
	avoid  routing.Avoid // brokers that refused this item so far
	tries  int32         // attempts sent
	state  uint8
	filled bool   // the adapter holds an answer for it
	mark   uint32 // absorb pass that matched the item
	due    time.Time
}

const (
	subSent    uint8 = iota // sent; nobody waits yet
	subWaiting              // a goroutine waits for it
	subDone                 // handled
)

type sub struct {
	broker int32
	idx    []int32
	p      Pending
	err    error // Send failed
	state  uint8
	held   bool      // its answer was absorbed: item answers may reference it
	lp     *longPoll // the wait of a subWaiting sub
	first  bool      // of the first round: its long poll may be parked
}

type result struct {
	si   int
	body []byte
	err  error
}

type splitter struct {
	d        *Dispatcher
	ops      adapter
	poller   longPoller  // ops, if it is one
	merger   partsMerger // ops, if it is one
	key      int16
	version  int16
	conn     uint64
	clientID *string // the client's, forwarded in sub-requests
	routeBy  routeBy // how items are routed
	whole    bool    // one item, forwarded whole (forward.go): not counted as split
	readOnly bool    // a maybe-processed attempt may be repeated
	// concurrent waits for all brokers at once (goroutines), so that a
	// longPoller can answer early; otherwise answers are awaited in turn,
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
}

// reset empties s for reuse by a pooled adapter, keeping its capacity and
// dropping references to answers.
func (s *splitter) reset() {
	clear(s.items)
	clear(s.subs)
	*s = splitter{items: s.items[:0], subs: s.subs[:0], idx: s.idx[:0], results: s.results}
}

func (s *splitter) init(d *Dispatcher, ops adapter, h Header, conn uint64) {
	s.d, s.ops, s.key, s.version, s.conn, s.clientID = d, ops, h.Key, h.Version, conn, h.ClientID
	s.poller, _ = ops.(longPoller)
	s.merger, _ = ops.(partsMerger)
	s.concurrent = s.poller != nil
	s.readOnly = readOnly(h.Key)
	s.ambCode = kerr.RequestTimedOut.Code
	s.lostCode = kerr.NotLeaderForPartition.Code
	s.noRoute = kerr.LeaderNotAvailable.Code
}

func (s *splitter) route(it *item) (int32, bool) {
	switch s.routeBy {
	case byGroup:
		return s.d.routes.RouteGroupAvoiding(it.topic, it.avoid)
	case byAnyBroker:
		return s.d.routes.AnyBrokerAvoiding(it.topic, it.avoid)
	case byBroker:
		_, live := s.d.routes.Broker(it.part)
		return it.part, live
	}
	return s.d.routes.RouteAvoiding(it.topic, it.part, it.avoid)
}

// dispatch routes the idle items and sends one sub-request per broker.
// whole, if not nil, is the client's encoded request: when every item is
// idle and goes to one broker it is forwarded as it is.
func (s *splitter) dispatch(ctx context.Context, whole []byte) {
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
		s.start = s.d.now()
	}
	s.retrying = !first
	s.idx = slices.Grow(s.idx, idle)
	for _, b := range distinct {
		start := len(s.idx)
		for i := range s.items {
			if it := &s.items[i]; it.state == itemIdle && it.broker == b {
				s.idx = append(s.idx, int32(i))
				it.state = itemSent
				it.tries++
			}
		}
		s.send(ctx, b, s.idx[start:len(s.idx):len(s.idx)], whole, len(distinct))
	}
	if first && !s.whole {
		s.d.m.split(s.key, len(distinct))
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

func (s *splitter) send(ctx context.Context, broker int32, idx []int32, whole []byte, nsubs int) {
	parkable := s.poller != nil && !s.retrying
	if parkable && s.adopt(broker, idx) {
		return
	}
	var body Body = Raw(whole)
	if whole == nil {
		s.enc = subBody{s: s, idx: idx, nsubs: nsubs}
		body = &s.enc
	}
	p, err := s.d.sender.Send(ctx, broker, s.conn, upstream.Request{
		Key: s.key, Version: s.version, ClientID: s.clientID, Body: body, Hold: s.holdNow(),
	})
	s.enc = subBody{}
	if err != nil {
		err = fmt.Errorf("send %s to broker %d: %w", kmsg.NameForKey(s.key), broker, err)
	}
	s.subs = append(s.subs, sub{broker: broker, idx: idx, p: p, err: err, first: parkable})
	s.outstanding++
}

// holdNow is the Hold of the sub-request about to be sent: a fetch's
// retries wait only for what is left of MaxWait.
func (s *splitter) holdNow() upstream.Hold {
	if s.poller != nil {
		return fetchHold(s.poller.maxWait())
	}
	return s.hold
}

// subBody encodes sub-request idx into Send's frame.
type subBody struct {
	s     *splitter
	idx   []int32
	nsubs int
}

func (b *subBody) AppendBody(dst []byte) []byte { return b.s.ops.encode(dst, b.idx, b.nsubs) }

// SizeHint: a sub-request is at most about the client's request.
func (b *subBody) SizeHint() int {
	if b.s.own != nil {
		return len(b.s.own) + 256
	}
	return 4096
}

// adopt waits for the connection's parked long poll to broker instead of
// sending a new sub-request, if that poll asks for the same.
func (s *splitter) adopt(broker int32, idx []int32) bool {
	k := parkKey{conn: s.conn, broker: broker}
	if !s.d.parked.has(k) { // the common case: no signature to compute
		return false
	}
	lp := s.d.parked.adopt(k, s.poller.signature(nil, idx))
	if lp == nil {
		return false
	}
	s.ensureResults()
	si := len(s.subs)
	s.subs = append(s.subs, sub{broker: broker, idx: idx, state: subWaiting, lp: lp, first: true})
	s.outstanding++
	s.waiting++
	lp.attach(s.results, si)
	return true
}

// finish waits for the answers, retrying as needed, and merges them.
func (s *splitter) finish(ctx context.Context) (Reply, error) {
	defer s.cleanup(ctx)
	if err := s.loop(ctx); err != nil {
		return Reply{}, err
	}
	if s.raw != nil {
		s.subs[0].held = false // see afterAbsorb: the only sub, with a Pending
		return Reply{Body: s.raw, Release: s.subs[0].p.Release}, nil
	}
	if s.merger != nil {
		buf, parts, ok := s.merger.mergeParts()
		skel := *buf
		if ok && parts != nil {
			return Reply{Parts: parts, Release: s.releaseLater(buf)}, nil
		}
		if ok { // nothing large: skel is the answer
			s.releaseAnswers()
			return Reply{Body: skel, Release: s.releaseLater(buf)}, nil
		}
		s.d.putBuf(buf)
	}
	// The answer is about as large as the broker answers it merges.
	buf := s.d.getBuf(s.answerBytes + 64*len(s.items) + 256)
	*buf = s.ops.merge(*buf)
	s.releaseAnswers()
	return Reply{Body: *buf, Release: s.releaseLater(buf)}, nil
}

func (s *splitter) handleSendErrors() {
	for si := range s.subs {
		if sb := &s.subs[si]; sb.state == subSent && sb.err != nil {
			s.handle(si, nil, sb.err)
		}
	}
}

// handle takes one sub-request's outcome.
func (s *splitter) handle(si int, body []byte, err error) {
	sb := &s.subs[si]
	sb.state = subDone
	s.outstanding--
	if err == nil {
		s.seq++
		sb.held = true
		s.answerBytes += len(body)
		clean, derr := s.ops.absorb(body, si)
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
	s.d.log.Debug("sub-request failed", "api", kmsg.NameForKey(s.key), "broker", sb.broker, "class", cls, "err", err)
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

func (s *splitter) afterAbsorb(si int, body []byte, clean bool) {
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
		s.handle(si, nil, fmt.Errorf("broker %d left partitions out of its %s answer", sb.broker, kmsg.NameForKey(s.key)))
		return
	}
	// An adopted long poll (no p) asked with an earlier request's
	// partition order: its answer is merged in the client's order.
	if !clean || si != 0 || len(s.subs) != 1 || len(sb.idx) != len(s.items) || sb.p == nil {
		return
	}
	for i := range s.items {
		if s.items[i].state != itemDone {
			return
		}
	}
	s.raw = body
}

// answered records a broker's answer to item i (already stored by the
// adapter) with code.
func (s *splitter) answered(i int32, code int16) {
	it := &s.items[i]
	it.filled = true
	it.mark = s.seq
	if retry.Classify(s.key, code) == retry.Definite && s.refused(i, code, nil) {
		return
	}
	it.state = itemDone
}

// done answers item i locally with code.
func (s *splitter) done(i int32, code int16) {
	it := &s.items[i]
	it.state = itemDone
	it.filled = true
	s.ops.fail(i, code)
}

// refused schedules a retry of item i; false when retries ran out, in
// which case the item is done with its last answer (or lostCode).
func (s *splitter) refused(i int32, code int16, err error) bool {
	it := &s.items[i]
	now := s.d.now()
	delay, ok := s.d.backoff(int(it.tries), s.deadline)
	if !ok {
		it.state = itemDone
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
	s.d.m.retried(s.key, code, err)
	return true
}

// ownerMoved says whether routing already names a live owner that has not
// refused this item, so the retry need not wait.
func (s *splitter) ownerMoved(it *item) bool {
	switch s.routeBy {
	case byGroup:
		b, owned := s.d.routes.Coordinator(it.topic)
		return owned && !it.avoid.Has(b)
	case byPartition:
		b, _, owned := s.d.routes.Owner(it.topic, it.part)
		return owned && !it.avoid.Has(b)
	}
	return false
}

// resendDue sends the retries that are due, or whose owner moved; it
// reports whether it sent anything.
func (s *splitter) resendDue(ctx context.Context, now time.Time) bool {
	n := 0
	for i := range s.items {
		it := &s.items[i]
		if it.state != itemRetry || (now.Before(it.due) && !s.ownerMoved(it)) {
			continue
		}
		it.state = itemIdle
		s.retries--
		n++
	}
	if n == 0 {
		return false
	}
	s.dispatch(ctx, nil)
	return true
}
