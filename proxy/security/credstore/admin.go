package credstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
)

// Put stores user's credential for a SCRAM mechanism in etcd and returns
// the revision of the change.
func Put(ctx context.Context, cli *clientv3.Client, l layout.Layout, user, mech string, c layout.SCRAMCredential) (int64, error) {
	if user == "" {
		return 0, fmt.Errorf("credstore: empty user name")
	}
	if !slices.Contains(Mechanisms, mech) {
		return 0, fmt.Errorf("credstore: %q is not a SCRAM mechanism", mech)
	}
	if err := CheckIterations(c.Iterations); err != nil {
		return 0, fmt.Errorf("credstore: %w", err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return 0, fmt.Errorf("credstore: encode credential: %w", err)
	}
	resp, err := cli.Put(ctx, l.SCRAMKey(user, mech), string(b))
	if err != nil {
		return 0, fmt.Errorf("credstore: store credential of %q: %w", user, err)
	}
	return resp.Header.Revision, nil
}

// Delete removes user's credential for a mechanism ("" removes all of the
// user's); it reports whether any existed, and the revision of the change.
func Delete(ctx context.Context, cli *clientv3.Client, l layout.Layout, user, mech string) (bool, int64, error) {
	key, opts := l.SCRAMKey(user, mech), []clientv3.OpOption(nil)
	if mech == "" {
		key, opts = l.SCRAMKey(user, ""), []clientv3.OpOption{clientv3.WithPrefix()}
	}
	resp, err := cli.Delete(ctx, key, opts...)
	if err != nil {
		return false, 0, fmt.Errorf("credstore: delete credential of %q: %w", user, err)
	}
	return resp.Deleted > 0, resp.Header.Revision, nil
}

// List reads every user's credentials from etcd.
func List(ctx context.Context, cli *clientv3.Client, l layout.Layout) ([]User, error) {
	resp, err := cli.Get(ctx, l.SCRAMPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("credstore: list credentials: %w", err)
	}
	by := map[string]*User{}
	for _, kv := range resp.Kvs {
		user, mech, ok := l.ParseSCRAMKey(string(kv.Key))
		if !ok {
			continue
		}
		var c layout.SCRAMCredential
		if err := json.Unmarshal(kv.Value, &c); err != nil {
			continue
		}
		u := by[user]
		if u == nil {
			u = &User{Name: user}
			by[user] = u
		}
		u.Credentials = append(u.Credentials, Info{Mechanism: mech, Iterations: c.Iterations})
	}
	return sortUsers(by), nil
}

// PutPassword stores the credentials a password yields for every SCRAM
// mechanism, each with a fresh salt. It returns the revision of the last
// write, for a View's WaitRevision.
func PutPassword(ctx context.Context, cli *clientv3.Client, l layout.Layout, user, password string, mechanisms []string, iterations int) (int64, error) {
	var rev int64
	for _, m := range mechanisms {
		c, err := NewCredential(m, password, iterations)
		if err != nil {
			return 0, err
		}
		if rev, err = Put(ctx, cli, l, user, m, c); err != nil {
			return 0, err
		}
	}
	return rev, nil
}
