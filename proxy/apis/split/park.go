package split

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/kproxy/kproxy/proxy/upstream"
)

// A longPoll is one wait for a fetch sub-request. While attached to a
// call it delivers its outcome on that call's results; detached from an
// early answer it may be parked: the connection's next fetch to the same
// broker, asking for the same partitions at the same offsets, adopts it
// instead of sending another long poll.
//
// Why: a broker holds a fetch for its MaxWait whatever the proxy does. An
// abandoned long poll takes room in flight on the client's upstream
// connection for that long, so a client that fetches quickly (data on
// other brokers) piles up abandoned polls on an idle broker until Send
// waits for room and every fetch waits out an old poll's MaxWait. With
// adoption each connection keeps at most one long poll per idle broker.
//
// A parked poll whose broker answers before the next fetch comes keeps the
// answer for that fetch, for at most parkedAnswerLife: under load the
// brokers left behind by an early answer usually answer with data while
// the client is still reading the answer it got, and dropping theirs made
// every broker read each record set about twice (the next fetch asked for
// the same offsets again). Records at an offset never change, so a kept
// answer is as good as a new one; only its watermarks are up to that much
// older, as a follower's are.
//
// Its goroutine ends when the broker's answer is delivered, adopted or
// dropped, or when the client connection's context ends; Env.Close joins
// it.
type longPoll struct {
	mu       sync.Mutex
	results  chan<- result // nil while detached
	si       int
	p        upstream.Pending // whose answer it waits for; the adopter releases it
	done     bool             // the outcome is in body and err
	body     []byte
	err      error
	registry *parkedPolls // set while parked
	key      parkKey
	sig      []byte        // the sub-request it answers (LongPoller.Signature)
	adopted  bool          // a fetch took it: its engine owns the answer
	kept     chan struct{} // while the goroutine keeps an answer: closed to end the keeping
}

// parkedAnswerLife bounds how long a parked poll keeps its broker's answer
// for the connection's next fetch: far above the time a client takes to
// read one answer and ask again, far below a change that would matter
// (watermarks, leadership).
const parkedAnswerLife = time.Second

func (lp *longPoll) wait(ctx context.Context, p upstream.Pending, wg *sync.WaitGroup) {
	defer wg.Done()
	body, err := p.Wait(ctx)
	lp.mu.Lock()
	lp.done, lp.body, lp.err = true, body, err
	if lp.results != nil {
		lp.results <- result{si: lp.si, body: body, err: err} // room: see ensureResults
		lp.mu.Unlock()
		return
	}
	if lp.registry == nil || err != nil { // nobody will ask for it
		lp.dropLocked()
		lp.mu.Unlock()
		return
	}
	lp.kept = make(chan struct{})
	kept := lp.kept
	lp.mu.Unlock()
	t := time.NewTimer(parkedAnswerLife)
	select {
	case <-kept: // adopted, or replaced by a newer poll
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if !lp.adopted {
		lp.dropLocked()
	}
}

// dropLocked gives up a detached poll's answer: it leaves the registry and
// its frame can be reused.
func (lp *longPoll) dropLocked() {
	if lp.registry != nil {
		lp.registry.m.CompareAndDelete(lp.key, lp)
		lp.registry = nil
	}
	if lp.done && lp.err == nil && lp.body != nil {
		lp.body = nil
		lp.p.Release()
	}
}

// endKeepingLocked wakes the goroutine if it keeps an answer.
func (lp *longPoll) endKeepingLocked() {
	if lp.kept != nil {
		close(lp.kept)
		lp.kept = nil
	}
}

// detach stops delivery; it reports whether the outcome was already sent
// on the call's results.
func (lp *longPoll) detach() bool {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.results = nil
	return lp.done
}

// attach delivers the outcome on results as sub si, now or when it comes.
func (lp *longPoll) attach(results chan<- result, si int) {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	lp.results, lp.si = results, si
	if lp.done {
		results <- result{si: si, body: lp.body, err: lp.err}
	}
}

// parkKey names a client connection's long poll to one broker.
type parkKey struct {
	conn   uint64
	broker int32
}

// parkedPolls holds parked long polls, at most one per client connection
// and broker; each leaves when it is adopted, replaced, or its answer is
// dropped (see longPoll). The zero value is ready.
type parkedPolls struct {
	m sync.Map // parkKey -> *longPoll
}

func (pp *parkedPolls) park(k parkKey, lp *longPoll, sig []byte) {
	lp.mu.Lock()
	if lp.done { // answered between detach and now: its goroutine dropped it
		lp.mu.Unlock()
		return
	}
	lp.registry, lp.key, lp.sig = pp, k, sig
	// Under lp's lock: its goroutine must not drop it before it is in the
	// map, or the map would keep an entry nobody removes.
	old, replaced := pp.m.Swap(k, lp)
	lp.mu.Unlock()
	if replaced && old != lp {
		old := old.(*longPoll)
		old.mu.Lock()
		if old.registry == pp && old.key == k {
			old.registry = nil // no longer in the map: only its goroutine holds it
			old.endKeepingLocked()
		}
		old.mu.Unlock()
	}
}

func (pp *parkedPolls) has(k parkKey) bool {
	_, ok := pp.m.Load(k)
	return ok
}

// adopt takes the parked long poll for k if it answers sig.
func (pp *parkedPolls) adopt(k parkKey, sig []byte) *longPoll {
	v, ok := pp.m.Load(k)
	if !ok {
		return nil
	}
	lp := v.(*longPoll)
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if lp.registry == nil || !bytes.Equal(lp.sig, sig) || !pp.m.CompareAndDelete(k, lp) {
		return nil
	}
	lp.registry, lp.adopted = nil, true
	lp.endKeepingLocked()
	return lp
}
