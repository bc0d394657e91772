package apis

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/retry"
	"github.com/kproxy/kproxy/routing"
)

func apiVersions(t *testing.T, d *Dispatcher, v int16) map[int16]vrange {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = v, "test", "1"
	resp := roundTrip(t, d, req).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions v%d: error %d", v, resp.ErrorCode)
	}
	out := map[int16]vrange{}
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = vrange{k.MinVersion, k.MaxVersion}
	}
	return out
}

// TestApiVersionsIntersection: each API is advertised at the versions kmsg
// decodes, this package implements and every live broker serves.
func TestApiVersionsIntersection(t *testing.T) {
	d, f, rt := newTestDispatcher(t)
	f.versions[2] = map[int16]vrange{int16(kmsg.Fetch): {4, 11}, int16(kmsg.Metadata): {0, 1}}
	f.versions[3] = map[int16]vrange{int16(kmsg.DeleteRecords): noVersions}
	got := apiVersions(t, d, 3)
	want := map[kmsg.Key]vrange{
		kmsg.Fetch:       {4, 11}, // broker 2's limit
		kmsg.Metadata:    {0, 13}, // answered by the proxy: brokers do not limit it
		kmsg.Produce:     {0, 13}, // everyone serves kmsg's range
		kmsg.ApiVersions: {0, 5},
	}
	for k, w := range want {
		if got[int16(k)] != w {
			t.Fatalf("%s advertised %+v, want %+v", k.Name(), got[int16(k)], w)
		}
	}
	for _, k := range []kmsg.Key{kmsg.DeleteRecords, kmsg.DescribeDelegationToken, kmsg.LeaderAndISR, kmsg.ShareFetch} {
		if _, ok := got[int16(k)]; ok {
			t.Fatalf("%s advertised, want absent", k.Name())
		}
	}
	if d.Supported(int16(kmsg.DeleteRecords), 0) || !d.Supported(int16(kmsg.Fetch), 11) || d.Supported(int16(kmsg.Fetch), 12) {
		t.Fatal("Supported disagrees with the advertised table")
	}

	// An API no broker serves gets its proper error, not a closed connection.
	req := partAPIs[4].build(1, spread)
	for _, a := range partAPIs[4].resp(roundTrip(t, d, req)) {
		if a.code != kerr.UnsupportedVersion.Code {
			t.Fatalf("DeleteRecords answered %+v, want UNSUPPORTED_VERSION", a)
		}
	}

	// A new broker is probed once and narrows the table: to its own range
	// for an API without a bridge (InitProducerID), to what can be bridged
	// to its range otherwise (Produce v9-v11 are sent to it at v8; v12 and
	// v13 cannot be, v0-v2 carry older records).
	f.versions[4] = map[int16]vrange{int16(kmsg.Produce): {3, 8}, int16(kmsg.InitProducerID): {0, 2}}
	rt.SetBroker(routing.Broker{ID: 4, Addr: "b4:9092"})
	for range 2 {
		got := apiVersions(t, d, 4)
		if p := got[int16(kmsg.Produce)]; p != (vrange{3, 11}) {
			t.Fatalf("Produce advertised %+v after broker 4 joined, want 3..11", p)
		}
		if p := got[int16(kmsg.InitProducerID)]; p != (vrange{0, 2}) {
			t.Fatalf("InitProducerID advertised %+v after broker 4 joined, want 0..2", p)
		}
	}
	if n := f.count(4, kmsg.ApiVersions); n != 1 {
		t.Fatalf("broker 4 probed %d times, want 1", n)
	}
	// It leaves: its limit goes with it.
	rt.DeleteBroker(4)
	if got := apiVersions(t, d, 4)[int16(kmsg.Produce)]; got != (vrange{0, 13}) {
		t.Fatalf("Produce advertised %+v after broker 4 left", got)
	}
}

func TestApiVersionsEveryVersion(t *testing.T) {
	d, _, _ := newTestDispatcher(t)
	vr := d.vers.current().get(int16(kmsg.ApiVersions))
	for v := vr.min; v <= vr.max; v++ {
		got := apiVersions(t, d, v)
		if got[int16(kmsg.ApiVersions)] != vr || got[int16(kmsg.Fetch)].max < 11 {
			t.Fatalf("v%d: ApiVersions %+v Fetch %+v", v, got[int16(kmsg.ApiVersions)], got[int16(kmsg.Fetch)])
		}
	}
}

// TestApiVersionsUnknownVersion: Kafka's rule for a newer client: error
// UNSUPPORTED_VERSION in a v0 body that still lists the versions.
func TestApiVersionsUnknownVersion(t *testing.T) {
	d, _, _ := newTestDispatcher(t)
	c := d.Begin(context.Background(), 1, Header{Key: int16(kmsg.ApiVersions), Version: 99}, []byte{1, 2, 3})
	reply, err := c.Finish(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse() // v0
	if err := resp.ReadFrom(replyBytes(reply)); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) < 10 {
		t.Fatalf("code %d with %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
}

func TestUnsupportedRequests(t *testing.T) {
	d, _, _ := newTestDispatcher(t)
	ctx := context.Background()
	// A known API this package does not implement: its error response.
	dt := kmsg.NewPtrDescribeDelegationTokenRequest()
	resp := roundTrip(t, d, dt).(*kmsg.DescribeDelegationTokenResponse)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("DescribeDelegationToken code %d", resp.ErrorCode)
	}
	// SASL outside an exchange (the connection runs exchanges): Kafka's
	// request handler answers ILLEGAL_SASL_STATE.
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	if resp := roundTrip(t, d, hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake code %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
	}
	// An API kmsg does not know and a version beyond kmsg: nothing can
	// be encoded; the connection must close (an error).
	for _, h := range []Header{{Key: 120, Version: 0}, {Key: int16(kmsg.Produce), Version: 99}} {
		if _, err := d.Begin(ctx, 1, h, nil).Finish(ctx); err == nil {
			t.Fatalf("%+v: want an error", h)
		}
	}
	// Malformed input for a supported API: close too.
	if _, err := d.Begin(ctx, 1, Header{Key: int16(kmsg.Produce), Version: 9}, []byte{1}).Finish(ctx); err == nil {
		t.Fatal("malformed produce: want an error")
	}
}

func TestProbeFailureLeavesBrokerOut(t *testing.T) {
	d, f, _ := newTestDispatcher(t)
	f.versions[1] = map[int16]vrange{int16(kmsg.Fetch): {0, 4}}
	f.on(1, kmsg.ApiVersions, func(int, kmsg.Request) fakeReply {
		return fakeReply{sendErr: fmt.Errorf("dial: %w", retry.ErrNotSent)}
	})
	got := apiVersions(t, d, 3)
	if got[int16(kmsg.Fetch)].max < 11 {
		t.Fatalf("an unreachable broker limited Fetch to %+v", got[int16(kmsg.Fetch)])
	}
	if t2 := d.vers.current(); t2.complete || len(t2.brokers) != 2 {
		t.Fatalf("table complete=%v brokers=%v", t2.complete, t2.brokers)
	}
}
