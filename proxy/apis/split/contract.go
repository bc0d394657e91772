// Package split is the proxy's split engine: it serves every client
// request made of independent items (partitions, groups, or one whole
// request per broker) by routing each item, sending one sub-request per
// broker, retrying items a broker refused on a fresh route within the
// request's budget, and collecting the answers for the API's adapter to
// merge in the client's order. It knows no API: package apis has one
// Adapter per API. Its limit: items are independent (an answer for one
// never changes another's), and brokers answer each sub-request whole.
//
// The contract, in one screen.
//
// An adapter (one per API) embeds an Engine and provides:
//   - decode: it decodes the client's request, calls Init with a Request
//     (budget, Hold, routing, local answer codes), adds the items in the
//     client's order (Reserve, Add, AddLocal), then calls Dispatch;
//   - Encode: the sub-request for a subset of the items;
//   - Absorb: a broker's answer to one sub-request: it stores each item's
//     answer (at the item's number), found with Matcher, and reports it
//     with Answered;
//   - Fail: a local answer for one item;
//   - Merge: the client's response, from every item's answer;
//   - optionally LongPoller (answers early, parks long polls; fetch),
//     PartsMerger (leaves record sets in the brokers' frames; fetch) and
//     VecAdapter (leaves record sets in the client's frame; produce).
//
// The engine routes, sends, retries within the budget and collects
// (Finish). Adapters read an item's identity (KeyOf), whether it is
// settled (Settled), a sub-request's items (ItemsOf) and the request's
// Key, Version, Own body and Deadline; nothing else of the engine is
// visible to them.
//
// Memory: the request is decoded from the client's body, which stays valid
// until Finish returns, so retries re-encode from the decoded request;
// record batches are copied only into the Sender's frame, or not at all
// for a VecAdapter: its sub-requests lend the Sender pieces of the client's
// body (upstream.VecBody), and Finish returns only once every sub-request
// sent has given them back (upstream.Lender: written, or withdrawn unsent;
// at most the Sender's write timeout after the answer is in hand). The
// client's frame is then reused by other clients, so no write may read it
// later.
package split

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/proxy/zone"
	"github.com/kproxy/kproxy/routing"
)

// VecAdapter is an Adapter whose sub-requests can leave large byte ranges
// of the client's body where they are (see Memory above).
type VecAdapter interface {
	// EncodeVec is Encode, except that it may append only a skeleton and
	// return the sub-request's pieces, which start where dst ended and
	// alias skel or the client's body (nil: skel holds it all). whole, if
	// not nil, is the client's body to forward as it is.
	EncodeVec(dst []byte, idx []int32, nsubs int, whole []byte) (skel []byte, pieces [][]byte)
	// VecSizeHint is at least about how many bytes EncodeVec appends, so
	// that the Sender's pooled frame need not grow.
	VecSizeHint(idx []int32, whole []byte) int
}

// Adapter adapts one API to the engine.
type Adapter interface {
	// Encode appends the sub-request for items idx (ascending) to dst;
	// nsubs is how many sub-requests this round sends.
	Encode(dst []byte, idx []int32, nsubs int) []byte
	// Absorb decodes a broker's answer to sub-request si, stores each
	// item's answer and reports it with Engine.Answered. clean means the
	// answer needed no rewriting (no leader hints), so that the engine may
	// pass it to the client as it came.
	Absorb(body []byte, si int) (clean bool, err error)
	// Fail stores a local answer with code for item i.
	Fail(i int32, code int16)
	// Merge appends the client's response to dst.
	Merge(dst []byte) []byte
}

// LongPoller is an Adapter whose sub-requests are long polls (fetch): its
// answer may go out once enough is in hand, and its first-round long polls
// that answer leaves behind may be parked and adopted (see longPoll).
type LongPoller interface {
	// Enough says the answers so far should go to the client now, without
	// waiting for outstanding brokers (after a grace, see graceFor).
	Enough() bool
	// Signature appends to dst what identifies the sub-request for items
	// idx, whatever their order.
	Signature(dst []byte, idx []int32) []byte
	// Hold is the Hold of the sub-request about to be sent (a retry waits
	// only for what is left of its MaxWait).
	Hold() upstream.Hold
}

// Request is what Init needs of one client request.
type Request struct {
	Key, Version int16
	Conn         uint64  // the client connection: the Sender affinity
	ClientID     *string // forwarded in sub-requests
	Own          []byte  // the client's body, unchanged until Finish returns
	Deadline     time.Time
	Hold         upstream.Hold // of every sub-request (a LongPoller's own)
	RouteBy      RouteBy
	// Rack is the client's rack as the request names it (Fetch v11+), the
	// first clue to its zone (Env.ClientZone).
	Rack string
	// Whole: one item forwarded whole, not counted as a split.
	Whole bool
	// Ordered keeps the order of the connection's items per partition
	// across retries and leader moves (Produce; see order.go).
	Ordered bool
	// PerItem sends every item as a sub-request of its own, with a Sender
	// affinity of its own per client connection and item (itemAffinity):
	// a broker that works a request's partitions one after another (a
	// KafScale Produce uploads each to S3 before the next) then works them
	// in parallel, on as many connections, while one client's requests
	// for one partition still follow each other on one connection.
	PerItem bool
	// LostCode answers items whose retries ran out unanswered (default
	// NOT_LEADER_OR_FOLLOWER); NoRoute items no live broker can take
	// (default LEADER_NOT_AVAILABLE).
	LostCode, NoRoute int16
}

// Key is what identifies an item in the client's request.
type Key struct {
	Topic  string // topic (or group) name, for routing and matching
	ID     [16]byte
	Part   int32 // partition, or broker id (ByBroker)
	TI, PI int32 // topic index in the client's request, partition index in that topic
}

// Sender forwards requests to brokers (upstream.Pool).
type Sender interface {
	Send(ctx context.Context, broker int32, affinity uint64, req upstream.Request) (upstream.Pending, error)
}

// Metrics counts what the engine does.
type Metrics interface {
	Split(key int16, subs int)                // a request's first round went to subs brokers
	Retried(key int16, code int16, err error) // an item is retried after code or err
	Early()                                   // a LongPoller answered before every broker did
	// Read counts where a ByPartitionRead item was routed and, for a zone
	// read, where the client's zone came from.
	Read(to routing.Read, src zone.Source)
	// Upstream counts n bytes sent to or received from a broker whose
	// locality to the client is local (zone.Locality).
	Upstream(key int16, local string, n int)
}

// Env is what the engine shares across one dispatcher's requests. Set its
// exported fields before the first Init; Close joins its goroutines.
type Env struct {
	Routes  *routing.Table
	Sender  Sender
	Log     *slog.Logger
	Now     func() time.Time
	Backoff func(attempt int, deadline time.Time) (time.Duration, bool) // retry.Policy.Next, serialized
	Metrics Metrics
	Bufs    *kwire.BufPool // merged answers; a PartsMerger's skeletons come from it too
	// Version, if set, is the version at which broker is sent a
	// sub-request of a client request at version; false when that broker
	// cannot serve it (see Bridger). Nil: the client's version.
	Version func(broker int32, key, version int16) (int16, bool)
	// ClientZone, if set, finds the zone of the client of ctx from its
	// rack (Request.Rack) and client id (zone.Resolver): ByPartitionRead
	// routes by it, and Metrics.Upstream counts bytes by it.
	ClientZone func(ctx context.Context, rack string, clientID *string) (string, zone.Source)
	// Repeatable says whether repeating an attempt of API key that may
	// have been processed has no further effect (retry.Classify), as the
	// API's row in the proxy's table says. Nil: nothing is.
	Repeatable func(key int16) bool

	parked parkedPolls    // long polls an early answer left (wait.go)
	lines  orderLines     // ordered items' lines, per client connection (order.go)
	polls  sync.WaitGroup // the long polls' goroutines
}

// Close waits for the goroutines that wait for long polls. Each ends when
// its broker answers or its client connection's context ends, so call
// Close once every client connection is gone or the Sender is closed.
func (e *Env) Close() { e.polls.Wait() }

func (e *Env) getBuf(n int) *[]byte { return e.Bufs.Get(n) }

func (e *Env) putBuf(b *[]byte) {
	if b != nil {
		e.Bufs.Put(b)
	}
}

// Answer is the merged answer to one client request.
type Answer struct {
	Body    []byte
	Parts   [][]byte // the body in pieces (Body nil); see PartsMerger
	Release func()   // lets the memory of Body or Parts be reused; may be nil
}

// RouteBy says how the engine routes a request's items.
type RouteBy uint8

const (
	ByPartition RouteBy = iota // Topic and Part, to the owner
	ByGroup                    // Topic is a group, to its coordinator
	ByAnyBroker                // Topic is a rendezvous key, to any live broker
	ByBroker                   // Part is a broker id: to that broker while it lives
	// ByPartitionRead is ByPartition for reads (Fetch): to a broker in the
	// client's zone when the table routes reads by zone (routing.RouteRead).
	ByPartitionRead
	// ByPartitionWrite is ByPartition for writes (Produce): a partition
	// without a live owner may go to a broker of the client's zone
	// (routing.RouteWrite).
	ByPartitionWrite
)

// Reserve makes room for n items.
func (s *Engine) Reserve(n int) { s.items = slices.Grow(s.items[:0], n) }

// Add appends an item to be routed; it returns the item's number.
func (s *Engine) Add(topic string, id [16]byte, part, ti, pi int32) int32 {
	s.items = append(s.items, item{Key: Key{Topic: topic, ID: id, Part: part, TI: ti, PI: pi}, broker: -1})
	return int32(len(s.items) - 1)
}

// KeyOf is item i's identity in the client's request.
func (s *Engine) KeyOf(i int32) Key { return s.items[i].Key }

// Settled says whether item i has its final answer.
func (s *Engine) Settled(i int32) bool { return s.items[i].state == itemDone }

// ItemsOf is the items of sub-request si.
func (s *Engine) ItemsOf(si int) []int32 { return s.subs[si].idx }

// FirstRound says whether no sub-request was sent yet.
func (s *Engine) FirstRound() bool { return len(s.subs) == 0 }

// AnsweredAll reports every item of sub-request si still waiting for an
// answer as answered with code, the Adapter having stored store(i).
func (s *Engine) AnsweredAll(si int, code int16, store func(i int32)) {
	for _, i := range s.ItemsOf(si) {
		if s.items[i].state == itemSent {
			store(i)
			s.Answered(i, code)
		}
	}
}

// SendErrors returns the errors of sub-requests that could not be sent.
func (s *Engine) SendErrors() []error {
	var errs []error
	for _, sb := range s.subs {
		if sb.err != nil {
			errs = append(errs, sb.err)
		}
	}
	return errs
}

// AddLocal appends an item the proxy answers itself with code.
func (s *Engine) AddLocal(topic string, id [16]byte, part, ti, pi int32, code int16) {
	i := s.Add(topic, id, part, ti, pi)
	s.items[i].state = itemDone
	s.items[i].filled = true
	s.ops.Fail(i, code)
}
