// The APIs answered from the proxy's own stores: the ACLs, the SCRAM
// credentials and the client quotas, each answered by package local; these
// are the Dispatcher's thin adapters for their rows.

package apis

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/local"
)

// The APIs answered from the proxy's own stores (package local). The
// store interfaces are local's; Config names them.
type (
	ACLAdmin   = local.ACLAdmin
	SCRAMAdmin = local.SCRAMAdmin
	QuotaAdmin = local.QuotaAdmin
)

func (d *Dispatcher) beginACLs(ctx context.Context, _ uint64, h Header, body []byte) (op, Reply, error) {
	req := kmsg.RequestForKey(h.Key)
	req.SetVersion(h.Version)
	if err := req.ReadFrom(body); err != nil { // copying: finish runs later
		return nil, Reply{}, fmt.Errorf("decode: %w", err)
	}
	return storeOp{local.ACLs(req, d.cfg.ACLs, d.guard(ctx, h.Key).Cluster, d.log)}, Reply{}, nil
}

func (d *Dispatcher) beginDescribeSCRAM(ctx context.Context, _ uint64, _ Header, req kmsg.Request, _ []byte) (op, Reply, error) {
	return nil, Reply{Body: local.DescribeSCRAM(ctx, d.cfg.SCRAM, req.(*kmsg.DescribeUserSCRAMCredentialsRequest)).AppendTo(nil)}, nil
}

func (d *Dispatcher) beginAlterSCRAM(ctx context.Context, _ uint64, _ Header, req kmsg.Request, _ []byte) (op, Reply, error) {
	return nil, Reply{Body: local.AlterSCRAM(ctx, d.cfg.SCRAM, req.(*kmsg.AlterUserSCRAMCredentialsRequest)).AppendTo(nil)}, nil
}

// The client quota APIs are forwarded when the proxy keeps no quotas.
func (d *Dispatcher) beginDescribeClientQuotas(ctx context.Context, conn uint64, h Header, req kmsg.Request, body []byte) (op, Reply, error) {
	if d.cfg.Quotas == nil {
		return d.beginAdmin(ctx, conn, h, req, body)
	}
	return nil, Reply{Body: local.DescribeClientQuotas(d.cfg.Quotas, req.(*kmsg.DescribeClientQuotasRequest)).AppendTo(nil)}, nil
}

func (d *Dispatcher) beginAlterClientQuotas(ctx context.Context, conn uint64, h Header, req kmsg.Request, body []byte) (op, Reply, error) {
	if d.cfg.Quotas == nil {
		return d.beginAdmin(ctx, conn, h, req, body)
	}
	return storeOp{local.AlterClientQuotas(d.cfg.Quotas, req.(*kmsg.AlterClientQuotasRequest), d.cfg.RetryBudget, d.log)}, Reply{}, nil
}

// storeOp is a local.Op as an op.
type storeOp struct{ o local.Op }

func (s storeOp) finish(ctx context.Context) (Reply, error) {
	resp, err := s.o.Finish(ctx)
	if err != nil {
		return Reply{}, err
	}
	return Reply{Body: resp.AppendTo(nil)}, nil
}
