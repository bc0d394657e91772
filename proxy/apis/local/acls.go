package local

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/security/authz"
)

// ACLAdmin stores the bindings CreateAcls, DescribeAcls and DeleteAcls
// manage (package aclstore, in etcd). Its methods return once the change
// is enforced by this replica.
type ACLAdmin interface {
	CreateACLs(ctx context.Context, bindings []authz.Binding) error
	DescribeACLs(ctx context.Context, f authz.Filter) ([]authz.Binding, error)
	DeleteACLs(ctx context.Context, filters []authz.Filter) ([][]authz.Binding, error)
}

// ACLs answers CreateAcls, DescribeAcls and DeleteAcls from admin (nil:
// SECURITY_DISABLED, as Kafka without an authorizer), as a Kafka broker
// answers them from its metadata: CreateAcls and DeleteAcls need Alter on
// the cluster, DescribeAcls Describe (cluster decides). They talk to etcd,
// so the work happens in Finish, off the connection's read loop.
func ACLs(req kmsg.Request, admin ACLAdmin, cluster func(kmsg.ACLOperation) bool, log *slog.Logger) Op {
	return &aclOp{admin: admin, cluster: cluster, log: log, req: req}
}

type aclOp struct {
	admin   ACLAdmin
	cluster func(kmsg.ACLOperation) bool
	log     *slog.Logger
	req     kmsg.Request
}

func (o *aclOp) Finish(ctx context.Context) (kmsg.Response, error) {
	switch r := o.req.(type) {
	case *kmsg.CreateACLsRequest:
		return o.create(ctx, r), nil
	case *kmsg.DescribeACLsRequest:
		return o.describe(ctx, r), nil
	case *kmsg.DeleteACLsRequest:
		return o.delete(ctx, r), nil
	}
	return nil, fmt.Errorf("no ACL API %s", kmsg.NameForKey(o.req.Key()))
}

// refusal is the code for the whole request when it cannot be served: no
// store, or the principal may not op the cluster.
func (o *aclOp) refusal(op kmsg.ACLOperation) int16 {
	switch {
	case o.admin == nil:
		return kerr.SecurityDisabled.Code
	case !o.cluster(op):
		return kerr.ClusterAuthorizationFailed.Code
	}
	return 0
}

func (o *aclOp) create(ctx context.Context, r *kmsg.CreateACLsRequest) kmsg.Response {
	resp := kmsg.NewPtrCreateACLsResponse()
	resp.Version = r.Version
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(r.Creations))
	if code := o.refusal(kmsg.ACLOperationAlter); code != 0 {
		for i := range resp.Results {
			resp.Results[i].ErrorCode = code
		}
		return resp
	}
	var valid []authz.Binding
	var at []int // request index of valid[i]
	for i, c := range r.Creations {
		b := authz.Binding{
			Pattern: authz.Pattern{Type: c.ResourceType, PatternType: c.ResourcePatternType, Name: c.ResourceName},
			Entry:   authz.Entry{Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType},
		}
		if err := b.Validate(); err != nil {
			setErr(&resp.Results[i].ErrorCode, &resp.Results[i].ErrorMessage, kerr.InvalidRequest.Code, err)
			continue
		}
		valid, at = append(valid, b), append(at, i)
	}
	if len(valid) == 0 {
		return resp
	}
	if err := o.admin.CreateACLs(ctx, valid); err != nil {
		o.log.Warn("CreateAcls failed", "err", err)
		for _, i := range at {
			setErr(&resp.Results[i].ErrorCode, &resp.Results[i].ErrorMessage, kerr.UnknownServerError.Code, err)
		}
	}
	return resp
}

func (o *aclOp) describe(ctx context.Context, r *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := kmsg.NewPtrDescribeACLsResponse()
	resp.Version = r.Version
	if code := o.refusal(kmsg.ACLOperationDescribe); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	f := authz.Filter{
		Type: r.ResourceType, PatternType: r.ResourcePatternType, Name: r.ResourceName,
		Principal: r.Principal, Host: r.Host, Operation: r.Operation, Permission: r.PermissionType,
	}
	if err := f.Validate(); err != nil {
		setErr(&resp.ErrorCode, &resp.ErrorMessage, kerr.InvalidRequest.Code, err)
		return resp
	}
	bs, err := o.admin.DescribeACLs(ctx, f)
	if err != nil {
		o.log.Warn("DescribeAcls failed", "err", err)
		setErr(&resp.ErrorCode, &resp.ErrorMessage, kerr.UnknownServerError.Code, err)
		return resp
	}
	resp.Resources = groupByPattern(bs)
	return resp
}

// groupByPattern lists bindings as DescribeAcls does: one resource per
// pattern, with its entries.
func groupByPattern(bs []authz.Binding) []kmsg.DescribeACLsResponseResource {
	var out []kmsg.DescribeACLsResponseResource
	at := map[authz.Pattern]int{}
	for _, b := range bs {
		i, ok := at[b.Pattern]
		if !ok {
			i = len(out)
			at[b.Pattern] = i
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName, res.ResourcePatternType = b.Type, b.Name, b.PatternType
			out = append(out, res)
		}
		acl := kmsg.NewDescribeACLsResponseResourceACL()
		acl.Principal, acl.Host, acl.Operation, acl.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		out[i].ACLs = append(out[i].ACLs, acl)
	}
	return out
}

func (o *aclOp) delete(ctx context.Context, r *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := kmsg.NewPtrDeleteACLsResponse()
	resp.Version = r.Version
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(r.Filters))
	if code := o.refusal(kmsg.ACLOperationAlter); code != 0 {
		for i := range resp.Results {
			resp.Results[i].ErrorCode = code
		}
		return resp
	}
	var filters []authz.Filter
	var at []int
	for i, rf := range r.Filters {
		f := authz.Filter{
			Type: rf.ResourceType, PatternType: rf.ResourcePatternType, Name: rf.ResourceName,
			Principal: rf.Principal, Host: rf.Host, Operation: rf.Operation, Permission: rf.PermissionType,
		}
		if err := f.Validate(); err != nil {
			setErr(&resp.Results[i].ErrorCode, &resp.Results[i].ErrorMessage, kerr.InvalidRequest.Code, err)
			continue
		}
		filters, at = append(filters, f), append(at, i)
	}
	if len(filters) == 0 {
		return resp
	}
	deleted, err := o.admin.DeleteACLs(ctx, filters)
	if err != nil {
		o.log.Warn("DeleteAcls failed", "err", err)
		for _, i := range at {
			setErr(&resp.Results[i].ErrorCode, &resp.Results[i].ErrorMessage, kerr.UnknownServerError.Code, err)
		}
		return resp
	}
	for j, i := range at {
		for _, b := range deleted[j] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.Type, b.Name, b.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
		}
	}
	return resp
}

func setErr(code *int16, msg **string, c int16, err error) {
	*code = c
	s := err.Error()
	*msg = &s
}
