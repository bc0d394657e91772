package apis

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Admin and transaction requests go to any live broker, unchanged: brokers
// share all metadata through etcd, so any of them can answer. The broker is
// picked by rendezvous on a key from the request (the transactional id, or
// the first topic or resource), so that related requests meet at the same
// broker; a definite refusal (NOT_CONTROLLER, a request never sent) is
// retried on another broker.
func (d *Dispatcher) beginAdmin(ctx context.Context, conn uint64, h Header, req kmsg.Request, body []byte) (op, Reply, error) {
	return d.forward(ctx, conn, h, req, body, adminKey(req), false)
}

// adminKey is the rendezvous key of an admin or transaction request: its
// row's routing key, or none (any broker).
func adminKey(req kmsg.Request) string {
	if route := apiTable[req.Key()].route; route != nil {
		return route(req)
	}
	return ""
}

// The routing keys of admin and transaction requests (their rows' route).
func firstOf[T any](list []T, name func(*T) string) string {
	if len(list) == 0 {
		return ""
	}
	return name(&list[0])
}

func createdTopic(t *kmsg.CreateTopicsRequestTopic) string        { return t.Topic }
func partitionsTopic(t *kmsg.CreatePartitionsRequestTopic) string { return t.Topic }
func describedName(r *kmsg.DescribeConfigsRequestResource) string { return r.ResourceName }
func alteredName(r *kmsg.AlterConfigsRequestResource) string      { return r.ResourceName }
func incrementallyAlteredName(r *kmsg.IncrementalAlterConfigsRequestResource) string {
	return r.ResourceName
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// addPartitionsKey: the transactional id, of the first transaction from v4
// (which batches transactions, broker to broker).
func addPartitionsKey(req kmsg.Request) string {
	r := req.(*kmsg.AddPartitionsToTxnRequest)
	if r.Version < 4 {
		return r.TransactionalID
	}
	if len(r.Transactions) > 0 {
		return r.Transactions[0].TransactionalID
	}
	return ""
}
