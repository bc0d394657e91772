package apis

import "slices"

// The split engine serves every request made of independent items
// (partitions, or groups in batched group requests).
//
// What an adapter provides (one per API, embedding a splitter):
//   - decode: its begin function decodes the client's request, calls init,
//     sets own (the client's body), deadline (the retry budget), hold, and,
//     unless items are partitions, routeBy and the local answer codes
//     (lostCode, noRoute); it adds the items in the client's order
//     (reserve, add, addLocal, or Dispatcher.addPartition), then calls
//     dispatch;
//   - adapter.encode: the sub-request for a subset of the items;
//   - adapter.absorb: a broker's answer to one sub-request, each item's
//     answer stored by the adapter (at the item's number) and reported with
//     answered, items found with matcher;
//   - adapter.fail: a local answer for one item;
//   - adapter.merge: the client's response, from every item's answer.
//
// What the engine does: routes each item, sends one sub-request per
// broker, retries items a broker refused on a fresh route within the
// budget, collects the answers and has the adapter merge them (finish).
// Adapters read an item's identity with keyOf, whether it is settled with
// settled, and a sub-request's items with itemsOf; nothing else of the
// engine is theirs. The three shapes of request share this one engine and
// its one retry loop: split by partition (produce, fetch, partList), by
// group (groupList), and a request forwarded whole to one broker
// (forwardOp) or to each broker (listGroupsOp).
//
// Optional parts, checked once by init: a longPoller (fetch) may answer
// before every broker did and parks its abandoned long polls (wait.go); a
// partsMerger (fetch) leaves record sets in the brokers' frames
// (release.go).
//
// Memory: the request is decoded from the client's body, which stays valid
// until Finish returns, so retries re-encode from the decoded request;
// record batches are copied only into the Sender's frame.

// adapter adapts one API to the engine.
type adapter interface {
	// encode appends the sub-request for items idx (ascending) to dst;
	// nsubs is how many sub-requests this round sends.
	encode(dst []byte, idx []int32, nsubs int) []byte
	// absorb decodes a broker's answer to sub-request si, stores each
	// item's answer and reports it with splitter.answered. clean means the
	// answer needed no rewriting (no leader hints).
	absorb(body []byte, si int) (clean bool, err error)
	// fail stores a local answer with code for item i.
	fail(i int32, code int16)
	// merge appends the client's response to dst.
	merge(dst []byte) []byte
}

// longPoller is an adapter whose sub-requests are long polls (fetch): its
// answer may go out once enough is in hand, and its first-round long polls
// that answer leaves behind may be parked and adopted (see longPoll).
type longPoller interface {
	// enough says the answers so far should go to the client now, without
	// waiting for outstanding brokers (after a grace, see graceFor).
	enough() bool
	// signature appends to dst what identifies the sub-request for items
	// idx, whatever their order.
	signature(dst []byte, idx []int32) []byte
	// maxWait is how long the broker may hold the sub-request being sent.
	maxWait() int32
}

// itemKey is what identifies an item in the client's request.
type itemKey struct {
	topic  string // topic (or group) name, for routing and matching
	id     [16]byte
	part   int32
	ti, pi int32 // topic index in the client's request, partition index in that topic
}

// routeBy says how the engine routes a request's items.
type routeBy uint8

const (
	byPartition routeBy = iota // topic and partition, to the owner
	byGroup                    // topic is a group, to its coordinator
	byAnyBroker                // topic is a rendezvous key, to any live broker
	byBroker                   // part is a broker id: to that broker while it lives
)

// reserve makes room for n items.
func (s *splitter) reserve(n int) { s.items = slices.Grow(s.items[:0], n) }

// add appends an item to be routed; it returns the item's number.
func (s *splitter) add(topic string, id [16]byte, part, ti, pi int32) int32 {
	s.items = append(s.items, item{itemKey: itemKey{topic: topic, id: id, part: part, ti: ti, pi: pi}, broker: -1})
	return int32(len(s.items) - 1)
}

// keyOf is item i's identity in the client's request.
func (s *splitter) keyOf(i int32) itemKey { return s.items[i].itemKey }

// settled says whether item i has its final answer.
func (s *splitter) settled(i int32) bool { return s.items[i].state == itemDone }

// itemsOf is the items of sub-request si.
func (s *splitter) itemsOf(si int) []int32 { return s.subs[si].idx }

// firstRound says whether no sub-request was sent yet.
func (s *splitter) firstRound() bool { return len(s.subs) == 0 }

// answeredAll reports every item of sub-request si still waiting for an
// answer as answered with code, the adapter having stored store(i).
func (s *splitter) answeredAll(si int, code int16, store func(i int32)) {
	for _, i := range s.itemsOf(si) {
		if s.items[i].state == itemSent {
			store(i)
			s.answered(i, code)
		}
	}
}

// sendErrors joins the errors of sub-requests that could not be sent.
func (s *splitter) sendErrors() []error {
	var errs []error
	for _, sb := range s.subs {
		if sb.err != nil {
			errs = append(errs, sb.err)
		}
	}
	return errs
}

// addLocal appends an item the proxy answers itself with code.
func (s *splitter) addLocal(topic string, id [16]byte, part, ti, pi int32, code int16) {
	i := s.add(topic, id, part, ti, pi)
	s.items[i].state = itemDone
	s.items[i].filled = true
	s.ops.fail(i, code)
}
