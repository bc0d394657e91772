package apis

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/upstream"
)

// TestHoldOf: what the Sender is told of a request comes from the decoded
// request at every version (it used to be parsed again from the bytes).
func TestHoldOf(t *testing.T) {
	for _, v := range []int16{0, 2, 3, 8, 9, 11} {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.TransactionID, req.Acks, req.TimeoutMillis = v, kmsg.StringPtr("tx"), 0, 400
		got := holdOf(decoded(t, req))
		if got != (upstream.Hold{Allowance: 400 * time.Millisecond, NoResponse: true}) {
			t.Errorf("produce v%d acks=0: %+v", v, got)
		}
	}
	for _, v := range []int16{0, 4, 12, 14, 15, 16} {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.ReplicaID = v, 1234, -1
		if got := holdOf(decoded(t, req)); got != (upstream.Hold{Long: true, Allowance: 1234 * time.Millisecond}) {
			t.Errorf("fetch v%d: %+v", v, got)
		}
	}
	for _, v := range []int16{0, 1, 5, 6, 9} {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = v, "a-group", 45000, 300000
		req.ProtocolType = "consumer"
		want := 300 * time.Second
		if v == 0 {
			want = 45 * time.Second
		}
		if got := holdOf(decoded(t, req)); got != (upstream.Hold{Long: true, Allowance: want}) {
			t.Errorf("join v%d: %+v, want %s", v, got, want)
		}
	}
	if got := holdOf(kmsg.NewPtrFetchRequest()); got.Long {
		t.Errorf("fetch without MaxWait held: %+v", got)
	}
	if got := holdOf(kmsg.NewPtrSyncGroupRequest()); !got.Long || got.Allowance != groupHoldAllowance {
		t.Errorf("sync: %+v", got)
	}
	if got := holdOf(kmsg.NewPtrMetadataRequest()); got != (upstream.Hold{}) {
		t.Errorf("metadata: %+v", got)
	}
}

// decoded encodes req and decodes it again, as Begin sees it.
func decoded(t *testing.T, req kmsg.Request) kmsg.Request {
	t.Helper()
	out := kmsg.RequestForKey(req.Key())
	out.SetVersion(req.GetVersion())
	if err := out.ReadFrom(req.AppendTo(nil)); err != nil {
		t.Fatalf("decode %T v%d: %v", req, req.GetVersion(), err)
	}
	return out
}
