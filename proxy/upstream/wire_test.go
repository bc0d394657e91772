package upstream

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestProduceFields(t *testing.T) {
	for _, tc := range []struct {
		version int16
		txn     *string
		acks    int16
		timeout int32
	}{
		{0, nil, 0, 100},
		{2, nil, 1, 200},
		{3, nil, -1, 300},
		{3, kmsg.StringPtr("tx"), 0, 400},
		{8, kmsg.StringPtr(""), 1, 500},
		{9, nil, 0, 600},
		{9, kmsg.StringPtr("transactional"), -1, 700},
		{11, kmsg.StringPtr("t"), 0, 800},
	} {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.TransactionID, req.Acks, req.TimeoutMillis = tc.version, tc.txn, tc.acks, tc.timeout
		acks, timeout, ok := produceFields(tc.version, req.AppendTo(nil))
		if !ok || acks != tc.acks || timeout != tc.timeout {
			t.Errorf("v%d txn %v: got acks %d timeout %d ok %v, want %d %d", tc.version, tc.txn, acks, timeout, ok, tc.acks, tc.timeout)
		}
	}
	for _, body := range [][]byte{nil, {0}, {0, 5, 'a'}, {0x80}} {
		if _, _, ok := produceFields(9, body); ok {
			t.Errorf("truncated body %v parsed", body)
		}
	}
}

func TestFetchMaxWait(t *testing.T) {
	for _, version := range []int16{0, 4, 12, 14, 15, 16} {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.ReplicaID = version, 1234, -1
		if got, ok := fetchMaxWait(version, req.AppendTo(nil)); !ok || got != 1234 {
			t.Errorf("v%d: max wait %d ok %v", version, got, ok)
		}
	}
	if _, ok := fetchMaxWait(4, []byte{0, 0, 0}); ok {
		t.Error("truncated fetch parsed")
	}
}

func TestJoinGroupRebalanceTimeout(t *testing.T) {
	for _, version := range []int16{0, 1, 5, 6, 9} {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = version, "a-group", 45000, 300000
		req.ProtocolType = "consumer"
		want := int32(300000)
		if version == 0 {
			want = 45000
		}
		if got, ok := joinGroupRebalanceTimeout(version, req.AppendTo(nil)); !ok || got != want {
			t.Errorf("v%d: rebalance timeout %d ok %v, want %d", version, got, ok, want)
		}
	}
	for _, tc := range []struct {
		version int16
		body    []byte
	}{
		{1, nil},
		{1, []byte{0, 3, 'a'}},
		{1, []byte{0, 1, 'a', 0, 0, 0, 1, 0, 0}},
		{6, []byte{0}},
		{6, []byte{3, 'a'}},
		{6, []byte{0x80}},
		{0, []byte{0xff, 0xff, 0, 0, 0, 1}},
	} {
		if _, ok := joinGroupRebalanceTimeout(tc.version, tc.body); ok {
			t.Errorf("v%d truncated body %v parsed", tc.version, tc.body)
		}
	}
}
