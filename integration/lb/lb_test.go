package lb

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/assembly/devcluster/devtest"
	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/proxyproto"
	"github.com/kproxy/kproxy/proxy/security/aclstore"
	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/proxy/zone"
	"github.com/kproxy/kproxy/testkit/testrig"
)

const (
	topic    = "lb-orders"
	writer   = "127.0.0.2" // may write, in zone-a
	stranger = "127.0.0.3" // may not, in zone-b
)

// rig is two kproxy replicas behind HAProxy, with what the test reads back.
type rig struct {
	c     *devcluster.Cluster
	front string // HAProxy's address: the one clients are given
	regs  [2]*prometheus.Registry

	mu    sync.Mutex
	audit []authz.Event
}

// TestBehindHAProxy: with HAProxy sending the PROXY protocol (v2, then v1)
// in front of two replicas, each client is known by its own address: an
// ACL for one host lets it write and refuses the other with Kafka's code,
// half-sent frames of one leave the other served, --zone-cidrs gives each
// its own zone in the metrics, and the audit log names each.
func TestBehindHAProxy(t *testing.T) {
	for _, send := range []string{"send-proxy-v2", "send-proxy"} {
		t.Run(send, func(t *testing.T) {
			r := startRig(t, send)
			r.checkACLHost(t)
			r.checkPartialFrames(t)
			r.checkZones(t)
			r.checkAudit(t)
		})
	}
}

func startRig(t *testing.T, send string) *rig {
	t.Helper()
	haproxyPath(t) // skips before anything starts
	addrs, err := testrig.FreeAddrs(3)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{front: addrs[0]}
	backends := addrs[1:]
	ranges, err := zone.ParseRanges(writer + "/32=zone-a," + stranger + "/32=zone-b")
	if err != nil {
		t.Fatal(err)
	}
	r.c = devtest.Start(t, devcluster.Config{
		Brokers: 2, Proxies: 2, StoreMemory: true, ProxyListen: backends, Racks: []string{"zone-a"},
		Authz: authz.Config{Mode: authz.DenyByDefault},
		ProxyConfig: func(i int, cfg *assembly.Config) {
			cfg.Listeners = []listener.Listener{{
				Name: "PLAINTEXT", Protocol: listener.Plaintext, Addr: backends[i], Advertise: r.front,
				ProxyProtocol: proxyproto.Policy{From: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}},
			}}
			cfg.ZoneRanges = ranges
			cfg.Server.Limits = proxy.Limits{QueuedMaxRequestBytes: 8 << 20, MaxPartialFrameBytesPerIP: 2 << 20}
			cfg.Audit, cfg.AuditAllowsEvery = r.record, 1
			r.regs[i] = cfg.Registry
		},
	})
	startHAProxy(t, r.front, send, backends)

	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, r.c.BrokerAddr(r.c.BrokerIDs()[0]), ""))
	if _, err := adm.CreateTopics(ctx, 1, -1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	allow := func(op kmsg.ACLOperation, host string) authz.Binding {
		return authz.Binding{
			Pattern: authz.Pattern{Type: kmsg.ACLResourceTypeTopic, PatternType: kmsg.ACLResourcePatternTypeLiteral, Name: topic},
			Entry:   authz.Entry{Principal: authz.AnonymousUser, Host: host, Operation: op, Permission: kmsg.ACLPermissionTypeAllow},
		}
	}
	bindings := []authz.Binding{allow(kmsg.ACLOperationDescribe, "*"), allow(kmsg.ACLOperationRead, "*"), allow(kmsg.ACLOperationWrite, writer)}
	if _, err := aclstore.Create(ctx, r.c.Client(), layout.New(""), bindings); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) record(e authz.Event) {
	r.mu.Lock()
	r.audit = append(r.audit, e)
	r.mu.Unlock()
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newClient is a kgo client of bootstrap dialing from local address from
// ("": any).
func newClient(t *testing.T, bootstrap, from string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.RecordDeliveryTimeout(10 * time.Second)}, opts...)
	if from != "" {
		opts = append(opts, kgo.Dialer(dialerFrom(from)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// checkACLHost: Write is allowed from the writer's host only.
func (r *rig) checkACLHost(t *testing.T) {
	t.Helper()
	w := newClient(t, r.front, writer)
	deadline := time.Now().Add(15 * time.Second) // until both replicas have the bindings
	for {
		err := w.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte("from " + writer)}).FirstErr()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idempotent produce from %s (allowed by host): %v", writer, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
		want error
	}{
		{"idempotent producer", nil, kerr.ClusterAuthorizationFailed},
		{"plain producer", []kgo.Opt{kgo.DisableIdempotentWrite()}, kerr.TopicAuthorizationFailed},
	} {
		s := newClient(t, r.front, stranger, tc.opts...)
		err := s.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte("from " + stranger)}).FirstErr()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s from %s: %v, want %v", tc.name, stranger, err, tc.want)
		}
	}
}

// checkPartialFrames: the writer's half-sent frames hold at most its own
// per-IP share, so the stranger's ApiVersions is answered within 1 s
// (behind one balancer address it would pass that address's share, full
// with the writer's frames, and be closed).
func (r *rig) checkPartialFrames(t *testing.T) {
	t.Helper()
	var wg sync.WaitGroup
	var conns []net.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
		wg.Wait()
	}()
	chunk := make([]byte, 768<<10)
	for range 6 {
		nc, err := dialerFrom(writer)(testCtx(t), "tcp", r.front)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		wg.Go(func() {
			_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = nc.Write(binary.BigEndian.AppendUint32(nil, 1<<20)) // a 1 MiB frame, three quarters sent
			_, _ = nc.Write(chunk)
		})
	}
	time.Sleep(300 * time.Millisecond) // let the half frames arrive (they only make the check harder)
	nc, err := dialerFrom(stranger)(testCtx(t), "tcp", r.front)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	start := time.Now()
	// 256 KiB: a frame read through the shared budget (a small one is
	// read from the connection's buffer), so it is charged to its IP.
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, strings.Repeat("a", 256<<10), "1"
	id := "lb-test"
	req := kwire.AppendRequestHeader(nil, int16(kmsg.ApiVersions), 3, 1, &id, true)
	req = av.AppendTo(req)
	kwire.FinishFrame(req)
	_ = nc.SetDeadline(start.Add(time.Second))
	if _, err := nc.Write(req); err != nil {
		t.Fatalf("ApiVersions from %s: write: %v", stranger, err)
	}
	if _, err := kwire.ReadFrame(bufio.NewReader(nc), 4, 1<<20, nil); err != nil {
		t.Fatalf("ApiVersions from %s beside %s's half frames: not answered within 1s (%v): %v", stranger, writer, time.Since(start), err)
	}
}

// checkZones: each client's fetches count as in its own zone (brokers are
// all in zone-a): the writer's as local, the stranger's as not, none as
// unknown (the balancer's 127.0.0.1 is in no range).
func (r *rig) checkZones(t *testing.T) {
	t.Helper()
	for _, tc := range []struct{ from, local string }{{writer, "true"}, {stranger, "false"}} {
		before := r.fetchBytes()
		cl := newClient(t, r.front, tc.from, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		fs := cl.PollRecords(ctx, 1)
		cancel()
		if err := fs.Err(); err != nil || fs.NumRecords() == 0 {
			t.Fatalf("fetch from %s: %v (%d records)", tc.from, err, fs.NumRecords())
		}
		cl.Close()
		after := r.fetchBytes()
		for _, l := range zone.Localities() {
			grew := after[l] > before[l]
			if grew != (l == tc.local) {
				t.Errorf("fetch from %s: kproxy_upstream_bytes_total{api=Fetch,zone_local=%s} %v -> %v; want growth only for zone_local=%s",
					tc.from, l, before[l], after[l], tc.local)
			}
		}
	}
}

// fetchBytes sums kproxy_upstream_bytes_total{api="Fetch"} over both
// replicas, by zone_local.
func (r *rig) fetchBytes() map[string]float64 {
	out := map[string]float64{}
	for _, reg := range r.regs {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() != "kproxy_upstream_bytes_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, lp := range m.GetLabel() {
					labels[lp.GetName()] = lp.GetValue()
				}
				if labels["api"] == "Fetch" {
					out[labels["zone_local"]] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// checkAudit: the audit log names each client by its own address, never
// the balancer's.
func (r *rig) checkAudit(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]map[string]bool{}
	for _, e := range r.audit {
		if seen[e.Client] == nil {
			seen[e.Client] = map[string]bool{}
		}
		seen[e.Client][e.Decision] = true
	}
	if !seen[writer]["allowed"] || !seen[stranger]["denied"] || len(seen) != 2 {
		t.Fatalf("audit decisions by client %v; want %s allowed, %s denied and no other client", seen, writer, stranger)
	}
}
