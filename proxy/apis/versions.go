package apis

import (
	"context"
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
