// Package apis answers the Kafka requests a client sends to the proxy: it
// decodes what routing needs, splits partition- and group-scoped requests by
// owner, forwards them through a Sender, retries definite failures on the
// current owner and merges the answers in the client's order. Connections,
// framing and response ordering belong to package proxy; pooled broker
// connections belong to package upstream.
//
// Ordering: a client may pipeline several produce requests for one partition
// (idempotent producers do). The proxy keeps their order by sending every
// request's first attempt from Begin, which the connection calls in the order
// it read the requests, and by the Sender writing requests with equal
// affinity to one broker connection in call order. Waiting, retrying and
// merging happen in Call.Finish, concurrently with later requests.
package apis

import (
	"context"
)

// Header is what the proxy read from a client's request header.
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string
}

// Reply is the answer to one client request.
type Reply struct {
	// Body is the encoded response body, without the response header.
	Body []byte
	// Parts, if not nil, is the body in pieces, written in order without
	// being joined (record batches left in the brokers' answer frames);
	// Body is then nil.
	Parts [][]byte
	// NoResponse is set when Kafka sends nothing back (Produce with acks=0).
	NoResponse bool
	// Release, if not nil, lets the memory of Body or Parts be reused: call
	// it once they are written (or will never be). Not calling it is safe.
	Release func()
}

// Sender forwards encoded request bodies to brokers.
type Sender interface {
	// Send appends body to a request frame and queues it on one of broker's
	// connections. Requests with equal affinity for one broker are written in
	// the order Send was called; against a broker that answers in order, the
	// requests it may hold (long-poll fetches, JoinGroup, SyncGroup) keep that
	// order among themselves on a connection of their own, so that they never
	// hold up other requests. Produce requests always share one ordered
	// path. Send does not keep body after it returns. An error from Send or
	// from the Pending wraps retry.ErrNotSent when the request definitely did
	// not reach the broker; any other error is ambiguous (the broker may have
	// processed it).
	//
	// clientID goes into the request header, so that brokers see the
	// client's own id (quotas, logs, ACLs by client id); nil sends the
	// proxy's.
	Send(ctx context.Context, broker int32, affinity uint64, key, version int16, clientID *string, body Body) (Pending, error)
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
