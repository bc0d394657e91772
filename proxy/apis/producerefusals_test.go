package apis

import (
	"bytes"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire/kwiretest"
	"github.com/kproxy/kproxy/proxy/apis/produceguard"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
)

// TestProduceRequiredAcks: acks outside -1..1 is answered
// INVALID_REQUIRED_ACKS for every partition, and nothing is forwarded.
func TestProduceRequiredAcks(t *testing.T) {
	for _, acks := range []int16{2, -2, 100} {
		bad := badInputVec()
		var log bytes.Buffer
		d, f, _ := newTestDispatcher(t, validation(recordcheck.Full, bad, &log))
		resp := roundTrip(t, d, produceOf(acks, map[int32][]byte{0: goodBatch(), 1: goodBatch()})).(*kmsg.ProduceResponse)
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != kerr.InvalidRequiredAcks.Code {
				t.Errorf("acks=%d partition %d: %v, want INVALID_REQUIRED_ACKS", acks, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
		if got := forwarded(f); len(got) != 0 {
			t.Errorf("acks=%d: forwarded %v", acks, got)
		}
		if got := testutil.ToFloat64(bad.WithLabelValues(produceguard.RequiredAcks)); got != 2 {
			t.Errorf("acks=%d: %s counted %v, want 2", acks, produceguard.RequiredAcks, got)
		}
	}
}

// TestProduceDuplicatePartition: a partition listed twice (in one topic,
// or in the topic listed twice) is appended once, with the last listing's
// records, and answered once, as Kafka's map of partitions does.
func TestProduceDuplicatePartition(t *testing.T) {
	first := goodBatch()
	last := kwiretest.Batch{ProducerID: -1, LeaderEpoch: -1, Values: kwiretest.Values("last")}.Encode()
	cases := []struct {
		name string
		req  func() *kmsg.ProduceRequest
	}{
		{"same topic", func() *kmsg.ProduceRequest {
			req := produceOf(-1, map[int32][]byte{0: first, 1: goodBatch()})
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, kmsg.ProduceRequestTopicPartition{Partition: 0, Records: last})
			return req
		}},
		{"topic twice", func() *kmsg.ProduceRequest {
			req := produceOf(-1, map[int32][]byte{0: first, 1: goodBatch()})
			again := kmsg.NewProduceRequestTopic()
			again.Topic = "t"
			again.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: last}}
			req.Topics = append(req.Topics, again)
			return req
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, f, _ := newTestDispatcher(t, validation(recordcheck.Full, badInputVec(), new(bytes.Buffer)))
			resp := roundTrip(t, d, c.req()).(*kmsg.ProduceResponse)
			answered := map[int32]int{}
			for _, rt := range resp.Topics {
				for _, p := range rt.Partitions {
					answered[p.Partition]++
					if p.ErrorCode != 0 {
						t.Errorf("partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
					}
				}
			}
			if answered[0] != 1 || answered[1] != 1 || len(answered) != 2 {
				t.Errorf("answers per partition %v, want one each for 0 and 1", answered)
			}
			sent := 0
			for _, s := range f.requests(kmsg.Produce) {
				for _, rt := range s.req.(*kmsg.ProduceRequest).Topics {
					for _, p := range rt.Partitions {
						if p.Partition == 0 {
							sent++
							if !bytes.Equal(p.Records, last) {
								t.Errorf("partition 0 forwarded with the first listing's records, want the last's")
							}
						}
					}
				}
			}
			if sent != 1 {
				t.Errorf("partition 0 forwarded %d times, want once", sent)
			}
		})
	}
}

// TestProduceTransactionalWithoutTxnAPIs: a transactional batch sent to a
// pool whose brokers advertise no transaction APIs cannot belong to a
// transaction begun through the proxy: INVALID_TXN_STATE, not forwarded. A
// pool that serves transactions gets it (and checks it itself).
func TestProduceTransactionalWithoutTxnAPIs(t *testing.T) {
	for _, c := range []struct {
		name  string
		txns  bool
		wants int16
	}{{"pool without transactions", false, kerr.InvalidTxnState.Code}, {"pool with transactions", true, 0}} {
		t.Run(c.name, func(t *testing.T) {
			bad := badInputVec()
			d, f, _ := newTestDispatcher(t, validation(recordcheck.Full, bad, new(bytes.Buffer)))
			if !c.txns {
				for b := int32(1); b <= 3; b++ {
					f.versions[b] = map[int16]vrange{int16(kmsg.EndTxn): noVersions, int16(kmsg.AddPartitionsToTxn): noVersions}
				}
			}
			req := produceOf(-1, map[int32][]byte{0: transactional(), 1: goodBatch()})
			id := "txn"
			req.TransactionID = &id
			resp := roundTrip(t, d, req).(*kmsg.ProduceResponse)
			for _, p := range resp.Topics[0].Partitions {
				want := int16(0)
				if p.Partition == 0 {
					want = c.wants
				}
				if p.ErrorCode != want {
					t.Errorf("partition %d: %v, want %v", p.Partition, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(want))
				}
			}
			if got := forwarded(f); got[0] != c.txns || !got[1] {
				t.Errorf("forwarded %v", got)
			}
			if want := map[bool]float64{false: 1, true: 0}[c.txns]; testutil.ToFloat64(bad.WithLabelValues(produceguard.TxnState)) != want {
				t.Errorf("%s not counted %v", produceguard.TxnState, want)
			}
		})
	}
}
