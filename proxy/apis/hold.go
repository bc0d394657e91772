package apis

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/retry"
)

// groupHoldAllowance is how long a broker may hold a SyncGroup (until the
// leader's assignment arrives): Kafka's default rebalance timeout
// (max.poll.interval.ms).
const groupHoldAllowance = 5 * time.Minute

// holdOf says, from a decoded request, how long its broker may hold it
// (upstream.Hold): its row's hold (table.go). This package owns the
// knowledge of which requests are long polls; the Sender only keeps them
// off shared connections.
//
// Held for long: Fetch with a positive MaxWait (a long poll), JoinGroup
// (until every member rejoined, up to its rebalance timeout), SyncGroup
// (until the leader's assignment), and the admin requests that wait for
// the cluster to converge (CreateTopics, DeleteTopics, DeleteRecords,
// CreatePartitions). Produce waits up to its timeout too, but is not
// Long: one client's produces must reach the broker on one connection, in
// order.
func holdOf(req kmsg.Request) upstream.Hold {
	if hold := apiTable[req.Key()].hold; hold != nil {
		return hold(req)
	}
	return upstream.Hold{}
}

// The holds of the rows that have one.
func produceHold(req kmsg.Request) upstream.Hold {
	r := req.(*kmsg.ProduceRequest)
	return upstream.Hold{Allowance: millis(r.TimeoutMillis), NoResponse: r.Acks == 0}
}

func fetchRequestHold(req kmsg.Request) upstream.Hold {
	return fetchHold(req.(*kmsg.FetchRequest).MaxWaitMillis)
}

func joinGroupHold(req kmsg.Request) upstream.Hold {
	r := req.(*kmsg.JoinGroupRequest)
	t := r.RebalanceTimeoutMillis
	if r.Version == 0 { // v0's session timeout served as both
		t = r.SessionTimeoutMillis
	}
	return upstream.Hold{Long: true, Allowance: millis(t)}
}

func syncGroupHold(kmsg.Request) upstream.Hold {
	return upstream.Hold{Long: true, Allowance: groupHoldAllowance}
}

// convergeHold: admin requests that wait for the cluster to converge.
func convergeHold(kmsg.Request) upstream.Hold { return upstream.Hold{Long: true} }

// fetchHold is the Hold of a fetch asking a broker to wait maxWait ms.
func fetchHold(maxWait int32) upstream.Hold {
	return upstream.Hold{Long: maxWait > 0, Allowance: millis(maxWait)}
}

func millis(ms int32) time.Duration { return time.Duration(max(ms, 0)) * time.Millisecond }

// send forwards a request the proxy decoded (req) whose encoding is body.
func (d *Dispatcher) send(ctx context.Context, broker int32, conn uint64, h Header, req kmsg.Request, body Body) (Pending, error) {
	return d.sender.Send(ctx, broker, conn, upstream.Request{
		Key: h.Key, Version: h.Version, ClientID: h.ClientID, Body: body, Hold: holdOf(req),
	})
}

func isNotSent(err error) bool { return errors.Is(err, retry.ErrNotSent) }
