package apis

import (
	"bytes"
	"context"
	"encoding/binary"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/routing"
)

// vrange is a version range; min > max means none.
type vrange struct{ min, max int16 }

var noVersions = vrange{min: 0, max: -1}

func (r vrange) ok() bool { return r.min <= r.max }

func (r vrange) and(o vrange) vrange { return vrange{min: max(r.min, o.min), max: min(r.max, o.max)} }

// vtable holds a version range per API key: r is what the proxy offers
// clients, direct what every broker in brokers speaks (the two differ only
// where bridge.go bridges versions).
type vtable struct {
	r      [numKeys]vrange
	direct rtable
	// byID is each counted broker's own table (read-only once stored).
	byID map[int32]*[numKeys]vrange
	// brokers lists the brokers whose versions are in r; complete is false
	// while some live broker's versions are unknown (probe failed).
	brokers  []int32
	complete bool
	changed  <-chan struct{} // routing change after which r may be stale
}

func (t *vtable) get(key int16) vrange { return (*rtable)(&t.r).get(key) }

// rtable is a version range per API key.
type rtable [numKeys]vrange

func (t *rtable) get(key int16) vrange {
	if key < 0 || int(key) >= numKeys {
		return noVersions
	}
	return t[key]
}

// versions tracks what every live broker serves. Brokers are probed with
// ApiVersions when they first appear; the advertised table is recomputed
// (lazily, on the next ApiVersions request) whenever routing changes.
type versions struct {
	d      *Dispatcher
	static *vtable
	cur    atomic.Pointer[vtable]

	mu       sync.Mutex // serializes refreshes; guards the maps
	byBroker map[int32]*[numKeys]vrange
	failedAt map[int32]time.Time
}

// probeRetry paces probes of a broker that did not answer.
const probeRetry = 5 * time.Second

func newVersions(d *Dispatcher) *versions {
	v := &versions{d: d, static: staticTable(), byBroker: map[int32]*[numKeys]vrange{}, failedAt: map[int32]time.Time{}}
	v.static.direct = v.static.r
	v.cur.Store(v.static)
	return v
}

func (v *versions) current() *vtable { return v.cur.Load() }

// refresh returns a table that accounts for every live broker, probing new
// ones. A broker that cannot be probed is left out (and retried later): it
// is not serving anyone right now.
func (v *versions) refresh(ctx context.Context) *vtable {
	if t := v.cur.Load(); t.changed != nil && !closed(t.changed) && t.complete {
		return t
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if t := v.cur.Load(); t.changed != nil && !closed(t.changed) && t.complete {
		return t
	}
	changed := v.d.routes.Changed() // taken before reading, so no change is missed
	live := v.d.routes.Brokers()
	v.forgetDead(live)
	v.probeNew(ctx, live)

	t := &vtable{r: v.static.r, direct: v.static.r, complete: true, changed: changed, byID: map[int32]*[numKeys]vrange{}}
	var known []*[numKeys]vrange
	for _, b := range live {
		br := v.byBroker[b.ID]
		if br == nil {
			t.complete = false
			continue
		}
		t.brokers = append(t.brokers, b.ID)
		t.byID[b.ID] = br
		known = append(known, br)
		for k := range numKeys {
			if apiTable[k].kind != kindLocal {
				t.direct[k] = t.direct[k].and(br[k])
			}
		}
	}
	for k := range numKeys {
		t.r[k] = t.direct[k]
		if apiTable[k].kind != kindLocal && bridgeRules[k] != nil && len(known) > 0 {
			t.r[k] = offered(int16(k), v.static.r[k], known)
		}
	}
	v.cur.Store(t)
	return t
}

// forgetDead drops brokers that left, so that a broker coming back (maybe
// upgraded) is probed again.
func (v *versions) forgetDead(live []routing.Broker) {
	alive := make(map[int32]bool, len(live))
	for _, b := range live {
		alive[b.ID] = true
	}
	for id := range v.byBroker {
		if !alive[id] {
			delete(v.byBroker, id)
		}
	}
	for id := range v.failedAt {
		if !alive[id] {
			delete(v.failedAt, id)
		}
	}
}

// probeNew asks every live broker without known versions, in parallel.
func (v *versions) probeNew(ctx context.Context, live []routing.Broker) {
	now := v.d.now()
	// A client hanging up must not count as the broker failing.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), v.d.cfg.ProbeTimeout)
	defer cancel()
	type answer struct {
		id  int32
		r   *[numKeys]vrange
		err error
	}
	var need []int32
	for _, b := range live {
		if v.byBroker[b.ID] != nil {
			continue
		}
		if at, ok := v.failedAt[b.ID]; ok && now.Sub(at) < probeRetry {
			continue
		}
		need = append(need, b.ID)
	}
	answers := make(chan answer, len(need))
	var wg sync.WaitGroup
	for _, id := range need {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := v.probe(ctx, id)
			answers <- answer{id, r, err}
		}()
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		if a.err != nil {
			v.failedAt[a.id] = now
			v.d.log.Warn("broker ApiVersions probe failed; not counted in advertised versions", "broker", a.id, "err", a.err)
			continue
		}
		delete(v.failedAt, a.id)
		v.byBroker[a.id] = a.r
	}
}

// probe asks the Sender what broker advertised in its connection's
// ApiVersions handshake.
func (v *versions) probe(ctx context.Context, broker int32) (*[numKeys]vrange, error) {
	keys, err := v.d.sender.ApiVersions(ctx, broker)
	if err != nil {
		return nil, err
	}
	var r [numKeys]vrange
	for k := range r {
		r[k] = noVersions
	}
	for _, k := range keys {
		if k.ApiKey >= 0 && int(k.ApiKey) < numKeys {
			r[k.ApiKey] = vrange{min: k.MinVersion, max: k.MaxVersion}
		}
	}
	return &r, nil
}

// apiVersionsOp answers ApiVersions after bringing the table up to date.
type apiVersionsOp struct {
	d       *Dispatcher
	version int16
}

func (d *Dispatcher) beginApiVersions(_ context.Context, _ uint64, h Header, body []byte) (op, Reply, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = h.Version
	if err := req.ReadFrom(body); err != nil {
		// Kafka answers undecodable ApiVersions (e.g. a newer client's
		// body) with the v0 fallback rather than closing.
		return nil, d.apiVersionsFallback(), nil
	}
	if code := d.identityError(req); code != 0 { // KIP-1242, below
		return nil, apiVersionsError(h.Version, code), nil
	}
	return &apiVersionsOp{d: d, version: h.Version}, Reply{}, nil
}

func (o *apiVersionsOp) finish(ctx context.Context) (Reply, error) {
	t := o.d.vers.refresh(ctx)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = o.version
	resp.ApiKeys = t.apiKeys()
	return Reply{Body: resp.AppendTo(nil)}, nil
}

// apiVersionsFallback is Kafka's answer to an ApiVersions version it does
// not know: error UNSUPPORTED_VERSION in a v0 body that still lists the
// versions, so the client can retry with one it shares.
func (d *Dispatcher) apiVersionsFallback() Reply {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = d.vers.current().apiKeys()
	return Reply{Body: resp.AppendTo(nil)}
}

func (t *vtable) apiKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, 48)
	for k := range numKeys {
		if r := t.r[k]; r.ok() {
			keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: int16(k), MinVersion: r.min, MaxVersion: r.max})
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

// throttleSentinel marks where a probe encoding puts throttle_time_ms.
const throttleSentinel = 0x7a5b3c2d

// throttlePos is where a response version has throttle_time_ms.
type throttlePos uint8

const (
	throttleNone      throttlePos = iota // no such field
	throttleFirst                        // bytes 0-3 of the body
	throttleElsewhere                    // after fields of varying size
)

// throttleAt says, per API key and version, where throttle_time_ms is,
// found once by encoding an empty response with a sentinel throttle. When
// first, it is at bytes 0-3 of any answer of that version, the proxy's own
// or a broker's passed through, so the proxy can raise it in place without
// decoding the body.
var throttleAt = func() (t [numKeys][]throttlePos) {
	var want [4]byte
	binary.BigEndian.PutUint32(want[:], throttleSentinel)
	for k := range numKeys {
		resp := kmsg.ResponseForKey(int16(k))
		st, ok := resp.(interface{ SetThrottle(int32) })
		if resp == nil || !ok {
			continue
		}
		t[k] = make([]throttlePos, resp.MaxVersion()+1)
		for v := range t[k] {
			resp.SetVersion(int16(v))
			st.SetThrottle(throttleSentinel)
			switch i := bytes.Index(resp.AppendTo(nil), want[:]); {
			case i == 0:
				t[k][v] = throttleFirst
			case i > 0:
				t[k][v] = throttleElsewhere
			}
		}
	}
	return t
}()

// SetThrottle raises the throttle_time_ms of an encoded response to ms
// (a broker's larger throttle stays). Where the field is first it is
// written in place; elsewhere (Produce, where it is last, after fields a
// broker may add) the response is decoded and encoded again, which only
// throttled clients pay for. It reports whether the response carries the
// throttle: versions without the field (Fetch v0, ...) leave the read
// delay as the only throttle.
func SetThrottle(key, version int16, r *Reply, ms int32) bool {
	if key < 0 || int(key) >= numKeys || version < 0 || int(version) >= len(throttleAt[key]) {
		return false
	}
	switch throttleAt[key][version] {
	case throttleNone:
		return false
	case throttleElsewhere:
		return reencodeThrottle(key, version, r, ms)
	}
	b := r.Body
	if b == nil && len(r.Parts) > 0 {
		b = r.Parts[0]
	}
	if len(b) < 4 {
		return false
	}
	if old := int32(binary.BigEndian.Uint32(b)); old < ms {
		binary.BigEndian.PutUint32(b, uint32(ms))
	}
	return true
}

// throttler is a response with throttle_time_ms.
type throttler interface {
	kmsg.Response
	Throttle() (int32, bool)
	SetThrottle(int32)
}

// reencodeThrottle decodes the body, raises its throttle and encodes it
// again into new memory.

func reencodeThrottle(key, version int16, r *Reply, ms int32) bool {
	resp, ok := kmsg.ResponseForKey(key).(throttler)
	if !ok || r.Parts != nil || r.Body == nil {
		return false
	}
	resp.SetVersion(version)
	if err := resp.ReadFrom(r.Body); err != nil {
		return false // left as it is: the client decodes what it would have
	}
	if old, _ := resp.Throttle(); old >= ms {
		return true
	}
	resp.SetThrottle(ms)
	body := resp.AppendTo(nil)
	if r.Release != nil { // the old body's memory is done with
		r.Release()
		r.Release = nil
	}
	r.Body = body
	return true
}

// The cluster identity an ApiVersions v5+ request carries (KIP-1242): a
// client that DNS or a balancer change sent to another cluster learns it
// from its first request and rebootstraps.

// identityError is the error Kafka answers an ApiVersions request with for
// the cluster and node it names, or 0: INVALID_REQUEST when only one of
// ClusterID and NodeID is set, REBOOTSTRAP_REQUIRED when they are not the
// cluster id Metadata reports and the node id the proxy advertises (its one
// node, metadata.go). Kafka checks the same pair in
// KafkaApis.handleApiVersionsRequest (clusterIdOrNodeIdIsInvalid).
func (d *Dispatcher) identityError(req *kmsg.ApiVersionsRequest) int16 {
	if req.Version < 5 {
		return 0
	}
	// -1 is "no node" (bootstrapping); any other value names one, 0
	// included: Kafka 4.4 refuses a NodeID 0 without a ClusterID.
	cluster, node := req.ClusterID != nil, req.NodeID != -1
	switch {
	case cluster != node:
		return kerr.InvalidRequest.Code
	case !cluster:
		return 0
	case *req.ClusterID != d.cfg.ClusterID || req.NodeID != d.cfg.NodeID:
		return kerr.RebootstrapRequired.Code
	}
	return 0
}

// apiVersionsError is Kafka's error answer to ApiVersions: the error code
// at the request's version, with no versions listed.
func apiVersionsError(version, code int16) Reply {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	resp.ErrorCode = code
	return Reply{Body: resp.AppendTo(nil)}
}
