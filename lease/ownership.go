package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"

	"github.com/kproxy/kproxy/layout"
)

// Owns reports from memory, without an etcd round trip, whether the session
// holds r under a lease that has not passed its local deadline. An ownership
// waiting for Reread after an ambiguous commit is not owned for serving.
func (s *Session) Owns(r Resource) (*Ownership, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	o := s.owned[r.OwnerKey]
	if o == nil || o.lease != s.leaseID || !s.validLocked() || o.reread.Load() {
		return nil, false
	}
	return o, true
}

// Acquire takes r in one etcd transaction when it is free. When this session
// already holds it, the held ownership is returned (re-read first if an
// ambiguous commit left it unsure). When the owner key exists under this
// session's lease but was forgotten (an ambiguous Acquire), it is adopted.
// Otherwise another broker holds it: OwnedElsewhereError.
func (s *Session) Acquire(ctx context.Context, r Resource) (*Ownership, error) {
	s.mu.RLock()
	id, valid, closed, held := s.leaseID, s.validLocked(), s.closed, s.owned[r.OwnerKey]
	s.mu.RUnlock()
	switch {
	case closed:
		return nil, fmt.Errorf("acquire %s: %w", r.Name, ErrClosed)
	case !valid:
		return nil, fmt.Errorf("acquire %s: %w: %w", r.Name, ErrNotOwner, ErrNoLease)
	case held != nil && held.lease == id:
		if held.reread.Load() {
			if err := s.Reread(ctx, held); err != nil {
				return nil, fmt.Errorf("acquire %s: %w", r.Name, err)
			}
		}
		return held, nil
	}
	o, err := s.acquireTxn(ctx, r, id)
	if err != nil {
		return nil, fmt.Errorf("acquire %s: %w", r.Name, err)
	}
	return s.keep(ctx, o)
}

func (s *Session) acquireTxn(ctx context.Context, r Resource, id clientv3.LeaseID) (*Ownership, error) {
	owner := layout.Marshal(layout.Owner{Broker: s.cfg.BrokerID})
	it := newItem(r.OwnerKey,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(r.OwnerKey), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(r.EpochKey, ""),
			clientv3.OpPut(r.OwnerKey, owner, clientv3.WithLease(id)),
			clientv3.OpGet(r.EpochKey), clientv3.OpGet(r.StateKey)},
		[]clientv3.Op{clientv3.OpGet(r.OwnerKey), clientv3.OpGet(r.EpochKey), clientv3.OpGet(r.StateKey)},
		len(r.OwnerKey)+len(r.EpochKey)+len(owner))
	a := s.acq.do(ctx, it)
	if a.err != nil {
		return nil, a.err
	}
	resp := a.resp
	o := newOwnership(r, id)
	if resp.Succeeded {
		o.Token = a.rev // every key a transaction creates has its revision
		o.Epoch = versionOf(resp.Responses[2])
		o.State, o.StateRev = stateOf(resp.Responses[3])
		return o, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil, fmt.Errorf("owner key %s vanished inside a transaction: %w", r.OwnerKey, ErrAmbiguous)
	}
	if clientv3.LeaseID(kvs[0].Lease) != id {
		cur, err := layout.DecodeOwner(kvs[0].Value)
		if err != nil {
			return nil, fmt.Errorf("owner key %s: %w", r.OwnerKey, err)
		}
		return nil, OwnedElsewhereError{Broker: cur}
	}
	// Created under our lease by an Acquire whose answer we lost: adopt it.
	o.Token = kvs[0].CreateRevision
	o.Epoch = versionOf(resp.Responses[1])
	o.State, o.StateRev = stateOf(resp.Responses[2])
	return o, nil
}

// keep records a freshly acquired ownership, unless the lease it was taken
// under is no longer the session's (then the owner key is given back).
func (s *Session) keep(ctx context.Context, o *Ownership) (*Ownership, error) {
	s.mu.Lock()
	if s.leaseID != o.lease || !s.validLocked() {
		s.mu.Unlock()
		s.releaseKey(ctx, o.Resource, o.Token, 0)
		return nil, fmt.Errorf("acquire %s: lease changed while acquiring: %w: %w", o.Resource.Name, ErrNotOwner, ErrNoLease)
	}
	if cur := s.owned[o.Resource.OwnerKey]; cur != nil && cur.Token == o.Token && cur.lease == o.lease {
		s.mu.Unlock()
		return cur, nil // a concurrent Acquire of the same resource won the race to record it
	}
	s.owned[o.Resource.OwnerKey] = o
	s.mu.Unlock()
	s.log.Info("acquired", "resource", o.Resource.Name, "epoch", o.Epoch, "token", o.Token, "state_rev", o.StateRev)
	return o, nil
}

// FencedCommit writes state to the state key, plus extra operations, in one
// transaction that etcd applies only if the owner key still has o's fencing
// token and the state key is unchanged since o last saw it. On success o.State
// and o.StateRev are updated and the commit revision is returned.
//
// Errors: ErrNotOwner (not held locally, nothing sent); ErrNeedsReread (an
// earlier commit was ambiguous); ErrFenced (definite refusal, nothing written,
// ownership dropped and reported); ErrAmbiguous (outcome unknown, the
// ownership now needs Reread). Other errors (e.g. a request too large) are
// definite failures that leave the ownership intact.
func (s *Session) FencedCommit(ctx context.Context, o *Ownership, state []byte, extra ...clientv3.Op) (int64, error) {
	if o == nil {
		return 0, fmt.Errorf("commit: nil ownership: %w", ErrNotOwner)
	}
	name := o.Resource.Name
	if !s.holds(o) {
		return 0, fmt.Errorf("commit %s: %w", name, ErrNotOwner)
	}
	if o.reread.Load() {
		return 0, fmt.Errorf("commit %s: %w", name, ErrNeedsReread)
	}
	ops := make([]clientv3.Op, 0, 1+len(extra))
	ops = append(ops, clientv3.OpPut(o.Resource.StateKey, string(state)))
	ops = append(ops, extra...)
	size := 0
	for _, op := range ops {
		size += len(op.KeyBytes()) + len(op.ValueBytes())
	}
	// Batched with other partitions' commits; the compares are this
	// partition's own, so a refusal here says nothing about the others.
	it := newItem(o.Resource.StateKey,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(o.Resource.OwnerKey), "=", o.Token),
			clientv3.Compare(clientv3.ModRevision(o.Resource.StateKey), "=", o.StateRev)},
		ops,
		[]clientv3.Op{clientv3.OpGet(o.Resource.OwnerKey), clientv3.OpGet(o.Resource.StateKey)},
		size)
	a := s.com.do(ctx, it)
	if a.err != nil {
		if errors.Is(a.err, ErrAmbiguous) {
			o.reread.Store(true)
		}
		return 0, fmt.Errorf("commit %s at token %d state rev %d: %w", name, o.Token, o.StateRev, a.err)
	}
	if !a.resp.Succeeded {
		why := fmt.Errorf("commit %s refused (%s): %w", name, refusal(o, (*clientv3.TxnResponse)(a.resp)), ErrFenced)
		s.drop(o, why)
		return 0, why
	}
	o.State, o.StateRev = bytes.Clone(state), a.rev
	return a.rev, nil
}

// Reread reads the state again under o's fencing token (after ErrAmbiguous)
// and clears the re-read mark. ErrFenced if the ownership is gone.
func (s *Session) Reread(ctx context.Context, o *Ownership) error {
	name := o.Resource.Name
	if !s.holds(o) {
		return fmt.Errorf("reread %s: %w", name, ErrNotOwner)
	}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(o.Resource.OwnerKey), "=", o.Token)).
		Then(clientv3.OpGet(o.Resource.StateKey)).
		Else(clientv3.OpGet(o.Resource.OwnerKey), clientv3.OpGet(o.Resource.StateKey)).
		Commit()
	if err != nil {
		return fmt.Errorf("reread %s: %w", name, classify(err))
	}
	if !resp.Succeeded {
		why := fmt.Errorf("reread %s (%s): %w", name, refusal(o, resp), ErrFenced)
		s.drop(o, why)
		return why
	}
	o.State, o.StateRev = stateOf(resp.Responses[0])
	o.reread.Store(false)
	return nil
}

// Release gives r up: its owner key is deleted if it is still ours, so a
// successor can acquire at once. Releasing what is not held is not an error.
func (s *Session) Release(ctx context.Context, r Resource) error {
	s.mu.Lock()
	o, id := s.owned[r.OwnerKey], s.leaseID
	delete(s.owned, r.OwnerKey)
	s.mu.Unlock()
	var token int64
	if o != nil {
		token = o.Token
		o.markLost()
	}
	if o == nil && id == 0 {
		return nil
	}
	if err := s.releaseKey(ctx, r, token, id); err != nil {
		return fmt.Errorf("release %s: %w", r.Name, err)
	}
	s.log.Info("released", "resource", r.Name, "token", token)
	return nil
}

// ReleaseAll releases every held resource (graceful hand-over before Close).
func (s *Session) ReleaseAll(ctx context.Context) error {
	s.mu.RLock()
	rs := make([]Resource, 0, len(s.owned))
	for _, o := range s.owned {
		rs = append(rs, o.Resource)
	}
	s.mu.RUnlock()
	var errs []error
	for _, r := range rs {
		errs = append(errs, s.Release(ctx, r))
	}
	return errors.Join(errs...)
}

// releaseKey deletes r's owner key if its create revision is token or, with
// token 0, if it lives under lease id (a key adopted from a lost answer).
func (s *Session) releaseKey(ctx context.Context, r Resource, token int64, id clientv3.LeaseID) error {
	cmp := clientv3.Compare(clientv3.CreateRevision(r.OwnerKey), "=", token)
	if token == 0 {
		cmp = clientv3.Compare(clientv3.LeaseValue(r.OwnerKey), "=", id)
	}
	_, err := s.cli.Txn(ctx).If(cmp).Then(clientv3.OpDelete(r.OwnerKey)).Commit()
	if err != nil {
		return fmt.Errorf("delete owner key %s: %w", r.OwnerKey, classify(err))
	}
	return nil
}

// holds reports whether o is the session's current, valid ownership.
func (s *Session) holds(o *Ownership) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.owned[o.Resource.OwnerKey] == o && o.lease == s.leaseID && s.validLocked()
}

// drop forgets o and reports the loss, if o is still the held ownership.
func (s *Session) drop(o *Ownership, reason error) {
	s.mu.Lock()
	dropped := s.owned[o.Resource.OwnerKey] == o
	if dropped {
		delete(s.owned, o.Resource.OwnerKey)
		o.markLost()
		s.losses.add(Loss{Resources: []Resource{o.Resource}, Reason: reason})
	}
	s.mu.Unlock()
	if dropped {
		s.log.Warn("ownership lost", "resource", o.Resource.Name, "token", o.Token, "reason", reason)
	}
}

// refusal explains a refused compare from the Else reads.
func refusal(o *Ownership, resp *clientv3.TxnResponse) string {
	owner := resp.Responses[0].GetResponseRange().GetKvs()
	switch {
	case len(owner) == 0:
		return "owner key gone"
	case owner[0].CreateRevision != o.Token:
		return fmt.Sprintf("owner key re-created at revision %d, ours was %d", owner[0].CreateRevision, o.Token)
	}
	_, rev := stateOf(resp.Responses[1])
	return fmt.Sprintf("state changed: mod revision %d, expected %d", rev, o.StateRev)
}

// classify marks an etcd error ambiguous unless etcd definitely rejected the
// request before applying it (invalid request, missing lease, no permission,
// back-pressure: ErrOverloaded).
func classify(err error) error {
	if overloaded(err) {
		return fmt.Errorf("%w: %w", ErrOverloaded, err)
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		switch ee.Code() {
		case codes.InvalidArgument, codes.NotFound, codes.PermissionDenied, codes.Unauthenticated:
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return fmt.Errorf("%w: %w: %w", ErrNotOwner, ErrNoLease, err)
			}
			return err
		}
	}
	return fmt.Errorf("%w: %w", ErrAmbiguous, err)
}

func versionOf(r *pb.ResponseOp) int32 {
	kvs := r.GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return 0
	}
	return int32(kvs[0].Version)
}

func stateOf(r *pb.ResponseOp) ([]byte, int64) {
	kvs := r.GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil, 0
	}
	return kvs[0].Value, kvs[0].ModRevision
}
