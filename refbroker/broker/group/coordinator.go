// Package group is the stub broker's classic consumer group coordinator
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, offsets, describe, list).
//
// The promise: a group is coordinated only while this broker holds its
// coordinator lease; committed offsets are written only through the fenced
// commit of the group state, so a deposed coordinator can never overwrite a
// successor's offsets. Membership is in memory: when the coordinator moves,
// members get UNKNOWN_MEMBER_ID or NOT_COORDINATOR and rejoin. Each group
// runs on its own goroutine, which owns its timers.
package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/lease"
	"github.com/kproxy/kproxy/refbroker/broker/pacer"
	"github.com/kproxy/kproxy/refbroker/broker/schema"
)

// Topics resolves topic ids for the request versions that carry them.
type Topics interface {
	Name(id [16]byte) (string, bool)
	ID(name string) ([16]byte, bool)
}

// Config configures a Coordinator. Session and Topics are required.
type Config struct {
	Session *lease.Session
	Layout  layout.Layout
	Topics  Topics
	Logger  *slog.Logger
	Now     func() time.Time
	// Session timeouts accepted from members (defaults 1s and 30m).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// OpTimeout bounds each etcd operation (default 5s).
	OpTimeout time.Duration
	// Pacer bounds the acquisitions in flight, shared with the broker's
	// partitions (nil: one of the coordinator's own, with pacer's defaults).
	// A request whose group gets no slot is answered
	// COORDINATOR_LOAD_IN_PROGRESS (see acquire).
	Pacer *pacer.Pacer
}

// Coordinator owns the groups this broker coordinates.
type Coordinator struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	groups map[string]*group
	load   map[string]*loading // groups being acquired
	closed bool
	wg     sync.WaitGroup
}

// NewCoordinator returns a coordinator with no groups.
func NewCoordinator(cfg Config) *Coordinator {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{cfg: cfg, log: cfg.Logger, ctx: ctx, cancel: cancel,
		groups: make(map[string]*group), load: make(map[string]*loading)}
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MinSessionTimeout <= 0 {
		c.MinSessionTimeout = time.Second
	}
	if c.MaxSessionTimeout <= 0 {
		c.MaxSessionTimeout = 30 * time.Minute
	}
	if c.OpTimeout <= 0 {
		c.OpTimeout = 5 * time.Second
	}
	if c.Pacer == nil {
		c.Pacer = pacer.New(pacer.Config{})
	}
	return c
}

// Close stops every group; waiting requests get NOT_COORDINATOR. Ownerships
// are left to the session (release or expiry).
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	clear(c.groups)
	c.mu.Unlock()
	for _, g := range gs {
		g.halt()
	}
	c.wg.Wait()
	c.cancel()
}

// Drop stops a group after its coordinator lease was reported lost, unless
// the session holds it again under the group's ownership (a late report).
func (c *Coordinator) Drop(id string, reason error) {
	c.mu.Lock()
	g := c.groups[id]
	c.mu.Unlock()
	if g == nil {
		return
	}
	if o, ok := c.cfg.Session.Owns(g.own.Resource); ok && o == g.own {
		return
	}
	c.log.Info("group coordinator lost", "group", id, "reason", reason)
	c.forget(g)
	g.halt()
}

func (c *Coordinator) forget(g *group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
	}
}

// loading is one acquisition of a group in progress; requests for the group
// that arrive meanwhile wait for it and share a refusal.
type loading struct {
	done chan struct{}
	code int16 // set before done closes; 0 when the group was loaded
}

// get returns the loaded group, acquiring its coordinator lease and reading
// its committed offsets on first use. The code is NOT_COORDINATOR when
// another broker coordinates it.
func (c *Coordinator) get(ctx context.Context, id string) (*group, int16) {
	if id == "" {
		return nil, kerr.InvalidGroupID.Code
	}
	res := lease.GroupResource(c.cfg.Layout, id, schema.New(c.cfg.Layout).GroupStateKey(id))
	for attempt := 0; attempt < 3; attempt++ {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, kerr.NotCoordinator.Code
		}
		g := c.groups[id]
		if g != nil {
			c.mu.Unlock()
			if o, ok := c.cfg.Session.Owns(res); ok && o == g.own {
				return g, 0
			}
			c.forget(g) // lost, or its state must be re-read: load anew
			g.halt()
			continue
		}
		if ld, busy := c.load[id]; busy {
			c.mu.Unlock()
			select {
			case <-ld.done:
				if ld.code != 0 { // one refusal answers all: no second wait
					return nil, ld.code
				}
				continue
			case <-ctx.Done():
				return nil, kerr.CoordinatorLoadInProgress.Code
			}
		}
		ld := &loading{done: make(chan struct{})}
		c.load[id] = ld
		c.mu.Unlock()
		g, code := c.acquire(ctx, id, res)
		c.mu.Lock()
		delete(c.load, id)
		ld.code = code
		close(ld.done)
		if g != nil && !c.closed {
			c.groups[id] = g
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				g.run()
			}()
		} else if g != nil {
			code, g = kerr.NotCoordinator.Code, nil
		}
		c.mu.Unlock()
		return g, code
	}
	return nil, kerr.CoordinatorLoadInProgress.Code
}

// acquire takes the group's coordinator lease. With no acquisition slot
// free it answers COORDINATOR_LOAD_IN_PROGRESS, as Kafka does while it loads
// a coordinator's state: this broker is the right coordinator, only not ready
// yet. Clients retry that code against the same coordinator after a backoff
// (librdkafka and sarama; kgo re-finds it, landing here again), and the
// proxy passes it through at once. COORDINATOR_NOT_AVAILABLE would send
// librdkafka back to FindCoordinator and make the proxy retry it on another
// broker, which answers NOT_COORDINATOR until the request's deadline, so the
// client would be held instead of told.
func (c *Coordinator) acquire(ctx context.Context, id string, res lease.Resource) (*group, int16) {
	if !c.cfg.Pacer.Take(ctx, pacer.Group) {
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	defer c.cfg.Pacer.Release()
	actx, cancel := context.WithTimeout(ctx, c.cfg.OpTimeout)
	defer cancel()
	o, err := c.cfg.Session.Acquire(actx, res)
	if err != nil {
		if errors.Is(err, lease.ErrOwnedElsewhere) {
			return nil, kerr.NotCoordinator.Code
		}
		c.log.Info("cannot coordinate group", "group", id, "err", err)
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	g := newGroup(c, id, o, schema.GroupState{})
	if err := g.load(o.State); err != nil {
		c.log.Warn("group state unreadable", "group", id, "err", err)
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	return g, 0
}

// call runs fn on g's goroutine and waits for what it sends on reply.
func call(ctx context.Context, g *group, fn func(reply chan kmsg.Response)) (kmsg.Response, int16) {
	reply := make(chan kmsg.Response, 1)
	if !g.do(func() { fn(reply) }) {
		return nil, kerr.NotCoordinator.Code
	}
	select {
	case r := <-reply:
		return r, 0
	case <-g.quit:
		select {
		case r := <-reply:
			return r, 0
		default:
		}
		return nil, kerr.NotCoordinator.Code
	case <-ctx.Done():
		return nil, -1
	}
}

// Handle answers a group request: JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups,
// ListGroups, DeleteGroups. nil means the context ended first (send nothing).
func (c *Coordinator) Handle(ctx context.Context, req kmsg.Request, cl Client) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		return c.single(ctx, r.Group, r, func(g *group, reply chan kmsg.Response) { g.join(r, cl, reply) })
	case *kmsg.SyncGroupRequest:
		return c.single(ctx, r.Group, r, func(g *group, reply chan kmsg.Response) { g.sync(r, reply) })
	case *kmsg.HeartbeatRequest:
		return c.single(ctx, r.Group, r, func(g *group, reply chan kmsg.Response) {
			resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = g.heartbeat(r)
			reply <- resp
		})
	case *kmsg.LeaveGroupRequest:
		return c.single(ctx, r.Group, r, func(g *group, reply chan kmsg.Response) { reply <- g.leave(r) })
	case *kmsg.OffsetCommitRequest:
		return c.single(ctx, r.Group, r, func(g *group, reply chan kmsg.Response) { reply <- g.commitOffsets(r) })
	case *kmsg.OffsetDeleteRequest:
		return c.single(ctx, r.Group, r, func(g *group, reply chan kmsg.Response) { reply <- g.deleteOffsets(r) })
	case *kmsg.OffsetFetchRequest:
		return c.offsetFetch(ctx, r)
	case *kmsg.DescribeGroupsRequest:
		return c.describe(ctx, r)
	case *kmsg.ListGroupsRequest:
		return c.list(r)
	case *kmsg.DeleteGroupsRequest:
		return c.deleteGroups(ctx, r)
	}
	c.log.Error("group coordinator got a request it does not serve", "type", fmt.Sprintf("%T", req))
	return nil
}

// single serves a request about one group; errors before the group
// goroutine answers are filled into the request's own response type.
func (c *Coordinator) single(ctx context.Context, id string, req kmsg.Request, fn func(*group, chan kmsg.Response)) kmsg.Response {
	g, code := c.get(ctx, id)
	var resp kmsg.Response
	if code == 0 {
		resp, code = call(ctx, g, func(reply chan kmsg.Response) { fn(g, reply) })
	}
	if code == -1 {
		return nil
	}
	if code != 0 {
		return errorResponse(req, code)
	}
	return resp
}

// errorResponse answers a single-group request with code everywhere.
func errorResponse(req kmsg.Request, code int16) kmsg.Response {
	switch r := req.(type) {
	case *kmsg.JoinGroupRequest:
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, r.MemberID
		return resp
	case *kmsg.SyncGroupRequest:
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.HeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.LeaveGroupRequest:
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.OffsetCommitRequest:
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	case *kmsg.OffsetDeleteRequest:
		resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = code
		return resp
	}
	return nil
}

func (g *group) halt() { g.stopOnce.Do(func() { close(g.stop) }) }
