package apis

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire/kwiretest"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
)

// validation turns produce validation on at level, counting in a fresh
// kproxy_bad_input_total and logging to log.
func validation(level recordcheck.Level, bad *prometheus.CounterVec, log *bytes.Buffer) func(*Config) {
	return func(c *Config) {
		c.ProduceValidation, c.BadInput = level, bad
		c.Logger = slog.New(slog.NewTextHandler(log, nil))
	}
}

func badInputVec() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kproxy_bad_input_total"}, []string{"reason"})
}

func goodBatch() []byte {
	return kwiretest.Batch{ProducerID: -1, LeaderEpoch: -1, Values: kwiretest.Values("a", "b")}.Encode()
}

// magic0Set is a magic-0 message set of one message, as librdkafka sends
// with MsgVer2 off.
func magic0Set() []byte {
	m := []byte{0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, 'v'} // crc, magic 0, attrs, null key, value "v"
	out := binary.BigEndian.AppendUint64(nil, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(len(m)))
	return append(out, m...)
}

func badCRC() []byte {
	b := goodBatch()
	b[len(b)-1] ^= 1
	return b
}

func transactional() []byte {
	b := kwiretest.Batch{ProducerID: 9, ProducerEpoch: 0, FirstSequence: 0, LeaderEpoch: -1, Values: kwiretest.Values("t")}.Encode()
	binary.BigEndian.PutUint16(b[21:], 0x10)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// produceOf builds a v9 Produce of topic "t" with records per partition.
func produceOf(acks int16, recs map[int32][]byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, acks, 5000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "t"
	for p := range int32(len(recs)) {
		t.Partitions = append(t.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p, Records: recs[p]})
	}
	req.Topics = append(req.Topics, t)
	return req
}

// forwarded lists the partitions of "t" that reached the fake brokers.
func forwarded(f *fakeSender) map[int32]bool {
	out := map[int32]bool{}
	for _, s := range f.requests(kmsg.Produce) {
		for _, t := range s.req.(*kmsg.ProduceRequest).Topics {
			for _, p := range t.Partitions {
				out[p.Partition] = true
			}
		}
	}
	return out
}

// TestProduceValidationPerPartition: each bad partition of one Produce is
// answered locally with Kafka's code and counted under its reason; the good
// ones go to their brokers and are acknowledged.
func TestProduceValidationPerPartition(t *testing.T) {
	bad := badInputVec()
	var log bytes.Buffer
	d, f, _ := newTestDispatcher(t, validation(recordcheck.Full, bad, &log))
	recs := map[int32][]byte{0: goodBatch(), 1: magic0Set(), 2: badCRC(), 3: goodBatch()[:30], 4: goodBatch()}
	resp := roundTrip(t, d, produceOf(-1, recs)).(*kmsg.ProduceResponse)
	want := map[int32]int16{0: 0, 1: kerr.InvalidRecord.Code, 2: kerr.CorruptMessage.Code, 3: kerr.InvalidRecord.Code, 4: 0}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != want[p.Partition] {
			t.Errorf("partition %d: %v, want %v", p.Partition, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(want[p.Partition]))
		}
		if p.ErrorCode == 0 && p.BaseOffset != value(owner("t", p.Partition), p.Partition) {
			t.Errorf("partition %d: base offset %d, not its broker's answer", p.Partition, p.BaseOffset)
		}
	}
	if got := forwarded(f); len(got) != 2 || !got[0] || !got[4] {
		t.Errorf("forwarded partitions %v, want 0 and 4 only", got)
	}
	for reason, n := range map[recordcheck.Reason]float64{recordcheck.Magic: 1, recordcheck.CRC: 1, recordcheck.Truncated: 1, recordcheck.BaseOffset: 0} {
		if got := testutil.ToFloat64(bad.WithLabelValues(reason.String())); got != n {
			t.Errorf("kproxy_bad_input_total{reason=%q} = %v, want %v", reason, got, n)
		}
	}
	for _, s := range []string{"produce partition refused", "topic=t", "partition=1", "reason=produce_magic", "code=INVALID_RECORD"} {
		if !strings.Contains(log.String(), s) {
			t.Errorf("log lacks %q:\n%s", s, log.String())
		}
	}
}

// TestProduceValidationLevels: framing lets a wrong CRC through, off lets
// everything through; neither counts it.
func TestProduceValidationLevels(t *testing.T) {
	for _, c := range []struct {
		level     recordcheck.Level
		forwarded int
	}{{recordcheck.Full, 1}, {recordcheck.Framing, 2}, {recordcheck.Off, 3}} {
		bad := badInputVec()
		var log bytes.Buffer
		d, f, _ := newTestDispatcher(t, validation(c.level, bad, &log))
		roundTrip(t, d, produceOf(-1, map[int32][]byte{0: goodBatch(), 1: badCRC(), 2: magic0Set()}))
		if got := len(forwarded(f)); got != c.forwarded {
			t.Errorf("%v: %d partitions forwarded, want %d", c.level, got, c.forwarded)
		}
		if got := testutil.ToFloat64(bad.WithLabelValues(recordcheck.Magic.String())) + testutil.ToFloat64(bad.WithLabelValues(recordcheck.CRC.String())); got != float64(3-c.forwarded) {
			t.Errorf("%v: %v refusals counted, want %d", c.level, got, 3-c.forwarded)
		}
	}
}

// TestProduceTransactionalWithoutID: as Kafka, a transactional batch in a
// request without a transactional id fails the whole request; nothing is
// forwarded. With an id, it goes through.
func TestProduceTransactionalWithoutID(t *testing.T) {
	bad := badInputVec()
	var log bytes.Buffer
	d, f, _ := newTestDispatcher(t, validation(recordcheck.Full, bad, &log))
	resp := roundTrip(t, d, produceOf(-1, map[int32][]byte{0: goodBatch(), 1: transactional()})).(*kmsg.ProduceResponse)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
			t.Errorf("partition %d: %v, want TRANSACTIONAL_ID_AUTHORIZATION_FAILED", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	if n := len(f.requests(kmsg.Produce)); n != 0 {
		t.Errorf("%d sub-requests forwarded", n)
	}
	if got := testutil.ToFloat64(bad.WithLabelValues(recordcheck.TransactionalNoID.String())); got != 1 {
		t.Errorf("counted %v, want 1", got)
	}

	req := produceOf(-1, map[int32][]byte{0: goodBatch(), 1: transactional()})
	req.TransactionID = kmsg.StringPtr("txn")
	resp = roundTrip(t, d, req).(*kmsg.ProduceResponse)
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Errorf("with a transactional id, partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
}

// TestProduceValidationAcksZero: as Kafka, a refused partition of an acks=0
// produce closes the connection (there is no answer to carry the code),
// after the valid partitions were sent.
func TestProduceValidationAcksZero(t *testing.T) {
	bad := badInputVec()
	var log bytes.Buffer
	d, f, _ := newTestDispatcher(t, validation(recordcheck.Full, bad, &log))
	reply, err := call(t, d, produceOf(0, map[int32][]byte{0: goodBatch(), 1: badCRC()}))
	if err == nil || !strings.Contains(err.Error(), "CORRUPT_MESSAGE") {
		t.Fatalf("acks=0 with a corrupt partition: reply %+v, err %v; want an error naming CORRUPT_MESSAGE", reply, err)
	}
	if got := forwarded(f); len(got) != 1 || !got[0] {
		t.Errorf("forwarded %v, want partition 0", got)
	}
	if got := testutil.ToFloat64(bad.WithLabelValues(recordcheck.CRC.String())); got != 1 {
		t.Errorf("counted %v, want 1", got)
	}
}

// TestProduceValidationAfterExistence: a partition of an unknown topic
// is answered as unknown, not counted as bad input (Kafka checks records
// after existence and authorization).
func TestProduceValidationAfterExistence(t *testing.T) {
	bad := badInputVec()
	var log bytes.Buffer
	d, _, _ := newTestDispatcher(t, validation(recordcheck.Full, bad, &log))
	req := produceOf(-1, map[int32][]byte{0: badCRC()})
	req.Topics[0].Topic = "nope"
	resp := roundTrip(t, d, req).(*kmsg.ProduceResponse)
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic with a corrupt batch: %v", kerr.ErrorForCode(c))
	}
	if got := testutil.ToFloat64(bad.WithLabelValues(recordcheck.CRC.String())); got != 0 {
		t.Errorf("counted %v, want 0", got)
	}
}
