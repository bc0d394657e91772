package local

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/quota"
)

// QuotaAdmin is where the proxy's client quotas live (quota.Store).
type QuotaAdmin interface {
	Table() *quota.Table
	Alter(ctx context.Context, e quota.Entity, ops []quota.Op) error
}

// Kafka's entity type names.
const (
	entityUser   = "user"
	entityClient = "client-id"
	entityIP     = "ip"
)

// DescribeClientQuotas answers from the quotas in force on this replica
// (the proxy enforces them; brokers behind it have none).
func DescribeClientQuotas(admin QuotaAdmin, req *kmsg.DescribeClientQuotasRequest) kmsg.Response {
	resp := kmsg.NewPtrDescribeClientQuotasResponse()
	resp.Version = req.Version
	cs, ip, msg := describeFilter(req.Components)
	switch {
	case msg != "":
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, &msg
	case ip: // the proxy keeps no ip quotas
	default:
		described := admin.Table().Describe(cs, req.Strict)
		for _, e := range sortedEntities(described) {
			resp.Entries = append(resp.Entries, describedEntry(e, described[e]))
		}
	}
	return resp
}

// describeFilter reads a filter's components; ip says the filter asks for
// ip quotas, msg why it is invalid.
func describeFilter(in []kmsg.DescribeClientQuotasRequestComponent) (cs []quota.Component, ip bool, msg string) {
	seen := map[string]bool{}
	for _, c := range in {
		if seen[c.EntityType] {
			return nil, false, fmt.Sprintf("duplicate entity type %q in the filter", c.EntityType)
		}
		seen[c.EntityType] = true
		qc := quota.Component{Part: quota.UserPart}
		switch c.EntityType {
		case entityUser:
		case entityClient:
			qc.Part = quota.ClientPart
		case entityIP:
			ip = true
			continue
		default:
			return nil, false, fmt.Sprintf("unknown entity type %q", c.EntityType)
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return nil, false, "an exact match needs a name"
			}
			qc.Match, qc.Name = quota.MatchExact, *c.Match
		case kmsg.QuotasMatchTypeDefault:
			qc.Match = quota.MatchDefault
		case kmsg.QuotasMatchTypeAny:
			qc.Match = quota.MatchAny
		default:
			return nil, false, fmt.Sprintf("unknown match type %d", c.MatchType)
		}
		cs = append(cs, qc)
	}
	if ip && len(cs) > 0 {
		return nil, false, "ip quotas cannot be combined with user or client-id"
	}
	return cs, ip, ""
}

func sortedEntities(m map[quota.Entity]quota.Limits) []quota.Entity {
	es := make([]quota.Entity, 0, len(m))
	for e := range m {
		es = append(es, e)
	}
	key := func(p quota.Part) string { return fmt.Sprint(p.Set, p.Default, p.Name) }
	sort.Slice(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if ka, kb := key(a.User), key(b.User); ka != kb {
			return ka < kb
		}
		return key(a.Client) < key(b.Client)
	})
	return es
}

func describedEntry(e quota.Entity, l quota.Limits) kmsg.DescribeClientQuotasResponseEntry {
	var out kmsg.DescribeClientQuotasResponseEntry
	add := func(typ string, p quota.Part) {
		if !p.Set {
			return
		}
		ent := kmsg.DescribeClientQuotasResponseEntryEntity{Type: typ}
		if !p.Default {
			ent.Name = kmsg.StringPtr(p.Name)
		}
		out.Entity = append(out.Entity, ent)
	}
	add(entityUser, e.User)
	add(entityClient, e.Client)
	for typ := range quota.NumTypes {
		if l.Has[typ] {
			out.Values = append(out.Values, kmsg.DescribeClientQuotasResponseEntryValue{Key: typ.String(), Value: l.Value[typ]})
		}
	}
	return out
}

// alterOp writes quota changes to etcd; every replica's watch puts them
// in force.
type alterOp struct {
	admin   QuotaAdmin
	budget  time.Duration
	log     *slog.Logger
	resp    *kmsg.AlterClientQuotasResponse
	entries []alterEntry
}

type alterEntry struct {
	i   int // index in resp.Entries
	e   quota.Entity
	ops []quota.Op
}

// AlterClientQuotas checks req's entries now and writes the valid ones to
// admin in Finish, within budget (etcd down: answer, do not hang).
func AlterClientQuotas(admin QuotaAdmin, req *kmsg.AlterClientQuotasRequest, budget time.Duration, log *slog.Logger) Op {
	o := &alterOp{admin: admin, budget: budget, log: log, resp: kmsg.NewPtrAlterClientQuotasResponse()}
	o.resp.Version = req.Version
	for i, in := range req.Entries {
		out := kmsg.AlterClientQuotasResponseEntry{}
		for _, ent := range in.Entity {
			out.Entity = append(out.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: ent.Type, Name: ent.Name})
		}
		e, ops, msg := alteration(in)
		if msg != "" {
			out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, &msg
		} else if !req.ValidateOnly {
			o.entries = append(o.entries, alterEntry{i: i, e: e, ops: ops})
		}
		o.resp.Entries = append(o.resp.Entries, out)
	}
	return o
}

// alteration checks one entry as Kafka does: user and client-id entities
// only (the proxy keeps no ip quotas), each once, with names not empty;
// known quota keys, each once, set to a positive value (byte rates whole).
func alteration(in kmsg.AlterClientQuotasRequestEntry) (quota.Entity, []quota.Op, string) {
	var e quota.Entity
	for _, ent := range in.Entity {
		p := &e.User
		switch ent.Type {
		case entityUser:
		case entityClient:
			p = &e.Client
		case entityIP:
			return e, nil, "ip quotas are not enforced by kproxy"
		default:
			return e, nil, fmt.Sprintf("unknown entity type %q", ent.Type)
		}
		if p.Set {
			return e, nil, fmt.Sprintf("duplicate entity type %q", ent.Type)
		}
		if ent.Name != nil && *ent.Name == "" {
			return e, nil, fmt.Sprintf("empty %s name", ent.Type)
		}
		*p = quota.DefaultPart()
		if ent.Name != nil {
			*p = quota.Named(*ent.Name)
		}
	}
	if !e.User.Set && !e.Client.Set {
		return e, nil, "no entity"
	}
	var ops []quota.Op
	for _, in := range in.Ops {
		typ, ok := quota.ParseType(in.Key)
		switch {
		case !ok:
			return e, nil, fmt.Sprintf("unknown quota key %q", in.Key)
		case slices.ContainsFunc(ops, func(o quota.Op) bool { return o.Type == typ }):
			return e, nil, fmt.Sprintf("duplicate quota key %q", in.Key)
		case !in.Remove && !(in.Value > 0):
			return e, nil, fmt.Sprintf("%s must be positive, not %v", in.Key, in.Value)
		case !in.Remove && typ != quota.RequestPercentage && in.Value != float64(int64(in.Value)):
			return e, nil, fmt.Sprintf("%s must be a whole number, not %v", in.Key, in.Value)
		}
		ops = append(ops, quota.Op{Type: typ, Value: in.Value, Remove: in.Remove})
	}
	return e, ops, ""
}

func (o *alterOp) Finish(ctx context.Context) (kmsg.Response, error) {
	cctx, cancel := context.WithTimeout(ctx, o.budget) // etcd down: answer, do not hang
	defer cancel()
	for _, a := range o.entries {
		if err := o.admin.Alter(cctx, a.e, a.ops); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			o.log.Warn("AlterClientQuotas failed", "err", err)
			msg := "storing the quota failed: " + err.Error()
			o.resp.Entries[a.i].ErrorCode, o.resp.Entries[a.i].ErrorMessage = kerr.UnknownServerError.Code, &msg
		}
	}
	return o.resp, nil
}
