// Package apis answers the Kafka requests a client sends to the proxy: it
// decodes what routing needs, splits partition- and group-scoped requests by
// owner, forwards them through a Sender, retries definite failures on the
// current owner and merges the answers in the client's order. Connections,
// framing and response ordering belong to package proxy; pooled broker
// connections belong to package upstream.
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
	// NoResponse is set when Kafka sends nothing back (Produce with acks=0).
	NoResponse bool
}

// Sender forwards one encoded request body to a broker and returns the
// response body (header stripped). A Sender error wraps retry.ErrNotSent when
// the request definitely did not reach the broker; any other error is
// ambiguous (the broker may have processed it).
type Sender interface {
	Send(ctx context.Context, broker int32, key, version int16, body []byte) ([]byte, error)
}
