// Package apis answers the Kafka requests a client sends to the proxy: one
// table (table.go) names each API's handler; each handler decodes what
// routing needs and is an adapter of the split engine (package split),
// which routes partition- and group-scoped items by owner, forwards them
// through a Sender, retries definite failures on the current owner and has
// the adapter merge the answers in the client's order. Connections,
// framing and response ordering belong to package proxy; pooled broker
// connections belong to package upstream.
//
// The table's row of an API is everything the proxy knows of it (kind,
// handler, auth rule, routing key, hold, repeatable, refusal codes); the
// packages below this one hold what the rows name and import nothing above
// them: split (the engine), authrule (the auth rules and guards), local
// (ACL, SCRAM and quota answers from the proxy's stores), answer (responses
// built by reflection) and recordcheck (produce record checks).
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

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/upstream"
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

// Sender forwards requests to brokers (upstream.Pool is the real one).
type Sender interface {
	// Send appends req's body to a request frame and queues it on one of
	// broker's connections. Requests with equal affinity for one broker are
	// written in the order Send was called; requests a broker may hold
	// (req.Hold.Long: long-poll fetches, JoinGroup, SyncGroup) keep that
	// order among themselves on a connection of their own against a broker
	// that answers in order, so that they never hold up other requests.
	// Produce requests always share one ordered path. Send does not keep
	// req.Body after it returns. An error from Send or from the Pending
	// wraps retry.ErrNotSent when the request definitely did not reach the
	// broker; any other error is ambiguous (the broker may have processed
	// it).
	Send(ctx context.Context, broker int32, affinity uint64, req upstream.Request) (Pending, error)
	// ApiVersions returns the API versions broker advertised when the
	// Sender connected to it, connecting if needed: brokers are asked once,
	// by the Sender's own handshake.
	ApiVersions(ctx context.Context, broker int32) ([]kmsg.ApiVersionsResponseApiKey, error)
}

// The request types that cross into the Sender are defined below this
// package, in upstream.
type (
	Body    = upstream.Body
	Raw     = upstream.Raw
	Pending = upstream.Pending
)
