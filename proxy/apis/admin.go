package apis

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Admin and transaction requests go to any live broker, unchanged: brokers
// share all metadata through etcd, so any of them can answer. The broker is
// picked by rendezvous on a key from the request (the transactional id, or
// the first topic or resource), so that related requests meet at the same
// broker; a definite refusal (NOT_CONTROLLER, a request never sent) is
// retried on another broker.
func (d *Dispatcher) beginAdmin(ctx context.Context, conn uint64, h Header, body []byte) (op, Reply, error) {
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)
	if err := req.(kmsg.UnsafeReadFrom).UnsafeReadFrom(body); err != nil {
		return nil, Reply{}, fmt.Errorf("decode: %w", err)
	}
	return d.forward(ctx, conn, h, req, body, adminKey(req), false)
}

// adminKey is the rendezvous key of an admin or transaction request.
func adminKey(req kmsg.Request) string {
	switch r := req.(type) {
	case *kmsg.InitProducerIDRequest:
		if r.TransactionalID != nil {
			return *r.TransactionalID
		}
	case *kmsg.AddPartitionsToTxnRequest:
		if r.Version < 4 {
			return r.TransactionalID
		}
		if len(r.Transactions) > 0 { // v4+ batches transactions (broker to broker)
			return r.Transactions[0].TransactionalID
		}
	case *kmsg.AddOffsetsToTxnRequest:
		return r.TransactionalID
	case *kmsg.EndTxnRequest:
		return r.TransactionalID
	case *kmsg.CreateTopicsRequest:
		if len(r.Topics) > 0 {
			return r.Topics[0].Topic
		}
	case *kmsg.CreatePartitionsRequest:
		if len(r.Topics) > 0 {
			return r.Topics[0].Topic
		}
	case *kmsg.DescribeConfigsRequest:
		if len(r.Resources) > 0 {
			return r.Resources[0].ResourceName
		}
	case *kmsg.AlterConfigsRequest:
		if len(r.Resources) > 0 {
			return r.Resources[0].ResourceName
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		if len(r.Resources) > 0 {
			return r.Resources[0].ResourceName
		}
	}
	return ""
}
