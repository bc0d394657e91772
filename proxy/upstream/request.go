package upstream

import (
	"context"
	"time"
)

// The types a caller (package apis) hands to Send. They live here, in the
// lower layer, so that upstream imports nothing of the proxy above it.

// Request is one request for Pool.Send.
type Request struct {
	Key, Version int16
	// ClientID goes into the request header, so that brokers see the
	// client's own id (quotas, logs, ACLs by client id); nil sends the
	// pool's Config.ClientID.
	ClientID *string
	Body     Body
	Hold     Hold
}

// Hold is what the pool must know of a request's timing, which only its
// decoded body says: the caller decoded it, so the pool does not parse it
// again.
type Hold struct {
	// Long: the broker may hold the request for long (a long poll,
	// JoinGroup until every member rejoined, SyncGroup until the leader's
	// assignment, admin requests that wait for the cluster to converge).
	// Against a broker that answers in order such a request must not share
	// a connection with strangers.
	Long bool
	// Allowance is how long the broker may legitimately take to answer (a
	// produce's timeout, a fetch's MaxWait, a rebalance timeout).
	Allowance time.Duration
	// NoResponse: the broker answers nothing (Produce with acks=0).
	NoResponse bool
}

// Body is a request body for Send. Send has it append itself to the request
// frame, so that a sub-request is encoded straight into the frame that is
// written, not encoded and then copied.
type Body interface {
	// AppendBody appends the encoded body to dst.
	AppendBody(dst []byte) []byte
	// SizeHint is about how many bytes AppendBody appends.
	SizeHint() int
}

// VecBody is a Body that can leave large byte ranges (produce record sets)
// out of the frame, to be written from where the caller holds them: one
// vectored write sends the frame's header and the body's pieces, and the
// bytes are never copied in user space.
//
// Lifetime: the pieces are lent to the pool. The caller keeps their memory
// unchanged until the Pending's Reclaim returns (see Lender), even after
// Wait returned: the response may come before the writer has returned.
type VecBody interface {
	Body
	// AppendVec appends the body to dst like AppendBody, or appends its
	// skeleton and returns the body's pieces: the body is the pieces in
	// order, the first starting where dst ended before the call; they
	// alias skel or the caller's memory. nil pieces: skel holds it all.
	AppendVec(dst []byte) (skel []byte, pieces [][]byte)
	// VecSizeHint is about how many bytes AppendVec appends to dst.
	VecSizeHint() int
}

// Lender is implemented by the Pool's Pendings (Reclaim returns at once
// when the body lent nothing).
type Lender interface {
	// Reclaim withdraws the request if it is still queued (it is then
	// never written) and waits until no write reads its pieces any more:
	// at once if it was written, or when the write under way ends, which
	// WriteTimeout bounds. The caller may reuse the pieces' memory after.
	Reclaim()
}

// Raw is a Body already encoded.
type Raw []byte

func (b Raw) AppendBody(dst []byte) []byte { return append(dst, b...) }
func (b Raw) SizeHint() int                { return len(b) }

// Pending is a request written (or about to be written) to a broker.
type Pending interface {
	// Wait returns the response body (response header stripped) or an error.
	Wait(ctx context.Context) ([]byte, error)
	// Release lets the body's memory be reused. Call it after Wait, once
	// nothing references the body any more; not calling it is safe.
	Release()
}
