package aclstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/security/authz"
)

// maxOpsPerTxn stays under etcd's default limit of 128 operations per
// transaction.
const maxOpsPerTxn = 128

// Create writes bindings (each validated first; none is written if one is
// invalid) and returns the revision of the last write. Writing a binding
// that exists already changes nothing a reader sees.
func Create(ctx context.Context, cli *clientv3.Client, l layout.Layout, bindings []authz.Binding) (int64, error) {
	for _, b := range bindings {
		if err := b.Validate(); err != nil {
			return 0, err
		}
	}
	ops := make([]clientv3.Op, 0, len(bindings))
	seen := make(map[string]bool, len(bindings)) // etcd refuses a key twice in one transaction
	for _, b := range bindings {
		a := ToLayout(b)
		if k := l.ACLKey(a); !seen[k] {
			seen[k] = true
			ops = append(ops, clientv3.OpPut(k, layout.Marshal(a)))
		}
	}
	return commit(ctx, cli, ops)
}

func commit(ctx context.Context, cli *clientv3.Client, ops []clientv3.Op) (int64, error) {
	var rev int64
	for chunk := range slices.Chunk(ops, maxOpsPerTxn) {
		resp, err := cli.Txn(ctx).Then(chunk...).Commit()
		if err != nil {
			return 0, fmt.Errorf("write ACL bindings: %w", err)
		}
		rev = resp.Header.Revision
	}
	return rev, nil
}

// entry is a stored binding and its key.
type entry struct {
	key string
	b   authz.Binding
}

// list reads every stored binding; bad values are skipped.
func list(ctx context.Context, cli *clientv3.Client, l layout.Layout) ([]entry, int64, error) {
	resp, err := cli.Get(ctx, l.ACLPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("list ACL bindings: %w", err)
	}
	out := make([]entry, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		a, err := l.DecodeACL(string(kv.Key), kv.Value)
		if err != nil {
			continue
		}
		out = append(out, entry{string(kv.Key), FromLayout(a)})
	}
	return out, resp.Header.Revision, nil
}

// List returns the stored bindings f selects, in key order.
func List(ctx context.Context, cli *clientv3.Client, l layout.Layout, f authz.Filter) ([]authz.Binding, error) {
	es, _, err := list(ctx, cli, l)
	if err != nil {
		return nil, err
	}
	var out []authz.Binding
	for _, e := range es {
		if f.Matches(e.b) {
			out = append(out, e.b)
		}
	}
	return out, nil
}

// Delete removes the stored bindings each filter selects and returns, per
// filter, the bindings it deleted (a binding two filters select is reported
// for both, as Kafka does), and the revision of the deletes.
func Delete(ctx context.Context, cli *clientv3.Client, l layout.Layout, filters []authz.Filter) ([][]authz.Binding, int64, error) {
	es, rev, err := list(ctx, cli, l)
	if err != nil {
		return nil, 0, err
	}
	matched := make([][]authz.Binding, len(filters))
	keys := map[string]bool{}
	var ops []clientv3.Op
	for i, f := range filters {
		for _, e := range es {
			if !f.Matches(e.b) {
				continue
			}
			matched[i] = append(matched[i], e.b)
			if !keys[e.key] {
				keys[e.key] = true
				ops = append(ops, clientv3.OpDelete(e.key))
			}
		}
	}
	if len(ops) == 0 {
		return matched, rev, nil
	}
	rev, err = commit(ctx, cli, ops)
	if err != nil {
		return nil, 0, fmt.Errorf("delete ACL bindings: %w", err)
	}
	return matched, rev, nil
}

// applyWait bounds how long the admin methods wait for this replica's view
// to include their own change.
const applyWait = 5 * time.Second

// CreateACLs writes bindings and waits until this replica enforces them
// (apis.ACLAdmin).
func (s *Store) CreateACLs(ctx context.Context, bindings []authz.Binding) error {
	rev, err := Create(ctx, s.cli, s.layout, bindings)
	if err != nil {
		return err
	}
	return s.waitApplied(ctx, rev)
}

// DescribeACLs lists the stored bindings f selects.
func (s *Store) DescribeACLs(ctx context.Context, f authz.Filter) ([]authz.Binding, error) {
	return List(ctx, s.cli, s.layout, f)
}

// DeleteACLs deletes what each filter selects and waits until this
// replica no longer enforces it.
func (s *Store) DeleteACLs(ctx context.Context, filters []authz.Filter) ([][]authz.Binding, error) {
	deleted, rev, err := Delete(ctx, s.cli, s.layout, filters)
	if err != nil {
		return nil, err
	}
	return deleted, s.waitApplied(ctx, rev)
}

func (s *Store) waitApplied(ctx context.Context, rev int64) error {
	ctx, cancel := context.WithTimeout(ctx, applyWait)
	defer cancel()
	return s.WaitRevision(ctx, rev)
}
