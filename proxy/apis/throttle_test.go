package apis

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSetThrottle(t *testing.T) {
	fetch := func(v int16, throttle int32) []byte {
		r := kmsg.NewPtrFetchResponse()
		r.Version, r.ThrottleMillis = v, throttle
		r.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 3, HighWatermark: 9}}}}
		return r.AppendTo(nil)
	}
	produce := func(v int16, throttle int32, hints bool) []byte {
		r := kmsg.NewPtrProduceResponse()
		r.Version, r.ThrottleMillis = v, throttle
		r.Topics = []kmsg.ProduceResponseTopic{{Topic: "t", Partitions: []kmsg.ProduceResponseTopicPartition{{Partition: 1, BaseOffset: 7}}}}
		if hints { // a tagged field after the throttle
			r.Brokers = []kmsg.ProduceResponseBroker{{NodeID: 4, Host: "h", Port: 9}}
		}
		return r.AppendTo(nil)
	}
	cases := []struct {
		name    string
		key, v  int16
		reply   Reply
		ms      int32
		carried bool
		want    int32
	}{
		{"fetch in place", int16(kmsg.Fetch), 12, Reply{Body: fetch(12, 5)}, 100, true, 100},
		{"fetch parts", int16(kmsg.Fetch), 16, Reply{Parts: [][]byte{fetch(16, 0)}}, 100, true, 100},
		{"broker's larger throttle stays", int16(kmsg.Fetch), 12, Reply{Body: fetch(12, 500)}, 100, true, 500},
		{"fetch v0 has none", int16(kmsg.Fetch), 0, Reply{Body: fetch(0, 0)}, 100, false, 0},
		{"produce re-encoded", int16(kmsg.Produce), 9, Reply{Body: produce(9, 0, false)}, 100, true, 100},
		{"produce with tags after", int16(kmsg.Produce), 10, Reply{Body: produce(10, 3, true)}, 100, true, 100},
		{"produce v0 has none", int16(kmsg.Produce), 0, Reply{Body: produce(0, 0, false)}, 100, false, 0},
		{"unknown key", 1000, 0, Reply{Body: []byte{0, 0, 0, 0}}, 100, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			released := false
			tc.reply.Release = func() { released = true }
			before := append([]byte(nil), tc.reply.Body...)
			if got := SetThrottle(tc.key, tc.v, &tc.reply, tc.ms); got != tc.carried {
				t.Fatalf("carried %v, want %v", got, tc.carried)
			}
			if !tc.carried {
				if string(tc.reply.Body) != string(before) {
					t.Fatal("body changed though the throttle was not carried")
				}
				return
			}
			body := tc.reply.Body
			if body == nil {
				body = tc.reply.Parts[0]
			}
			resp := kmsg.ResponseForKey(tc.key)
			resp.SetVersion(tc.v)
			if err := resp.ReadFrom(body); err != nil {
				t.Fatalf("patched body does not decode: %v", err)
			}
			if got, _ := resp.(kmsg.ThrottleResponse).Throttle(); got != tc.want {
				t.Fatalf("throttle %d, want %d", got, tc.want)
			}
			switch r := resp.(type) {
			case *kmsg.ProduceResponse:
				if r.Topics[0].Partitions[0].BaseOffset != 7 || (tc.v >= 10 && r.Brokers[0].NodeID != 4) {
					t.Fatalf("re-encoding lost fields: %+v", r)
				}
				if !released && tc.want == tc.ms {
					t.Fatal("the replaced body's memory was not released")
				}
			case *kmsg.FetchResponse:
				if r.Topics[0].Partitions[0].HighWatermark != 9 {
					t.Fatalf("patch broke the body: %+v", r)
				}
			}
		})
	}
}
