package security

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/listener"
)

// TestListenersAdvertiseTheirOwnAddress: Metadata, FindCoordinator and
// DescribeCluster answer each client with the advertised address of the
// listener it came in on.
func TestListenersAdvertiseTheirOwnAddress(t *testing.T) {
	ls, err := listener.ParseListeners("INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0", "EXTERNAL://kafka.example.com:19093", "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT")
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, 1, func(_ int, cfg *assembly.Config) { cfg.Listeners = ls })
	internal := c.Proxy(0).ListenerAddr("INTERNAL")
	external := c.Proxy(0).ListenerAddr("EXTERNAL")
	if internal == "" || external == "" || internal == external {
		t.Fatalf("listener addresses %q and %q", internal, external)
	}
	for _, tc := range []struct {
		name, dial, wantHost string
		wantPort             int32
	}{
		{"internal", internal, "127.0.0.1", port(t, internal)},
		{"external", external, "kafka.example.com", 19093},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t, 20*time.Second)
			cl := newClient(t, tc.dial)
			meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("metadata via %s: %v", tc.dial, err)
			}
			if len(meta.Brokers) != 1 || meta.Brokers[0].Host != tc.wantHost || meta.Brokers[0].Port != tc.wantPort {
				t.Errorf("metadata via %s: brokers %+v, want %s:%d", tc.dial, meta.Brokers, tc.wantHost, tc.wantPort)
			}
			// A fresh client: the first one now knows the advertised
			// address, which for EXTERNAL resolves nowhere.
			cl2 := newClient(t, tc.dial)
			fc := kmsg.NewPtrFindCoordinatorRequest()
			fc.CoordinatorKey = "g"
			fcr, err := fc.RequestWith(ctx, cl2)
			if err != nil {
				t.Fatalf("find coordinator via %s: %v", tc.dial, err)
			}
			if fcr.Host != tc.wantHost || fcr.Port != tc.wantPort {
				if len(fcr.Coordinators) != 1 || fcr.Coordinators[0].Host != tc.wantHost || fcr.Coordinators[0].Port != tc.wantPort {
					t.Errorf("find coordinator via %s: %+v, want %s:%d", tc.dial, fcr, tc.wantHost, tc.wantPort)
				}
			}
		})
	}
	// The plaintext listener works end to end for a producer.
	ctx := testContext(t, 20*time.Second)
	cl := newClient(t, internal, kgo.DefaultProduceTopic("listeners"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce via INTERNAL: %v", err)
	}
}

func port(t *testing.T, addr string) int32 {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return int32(n)
}
