// Package local answers the admin APIs the proxy serves from its own stores
// instead of forwarding them: the ACL APIs (bindings in aclstore), the SCRAM
// credential APIs (KIP-554, credstore) and the client quota APIs (quota,
// enforced by the proxy itself). It promises Kafka's answers and codes for
// each entry; its limits: authorization is decided by the caller (the auth
// rules, or the cluster check it is given), and it neither decodes nor
// encodes the wire form (package apis does).
package local

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Op is an answer that talks to a store: Finish runs off the client
// connection's read loop, once.
type Op interface {
	Finish(ctx context.Context) (kmsg.Response, error)
}
