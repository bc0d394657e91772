package integration

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/internal/kwire/kwiretest"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/refbroker/broker"
	"github.com/kproxy/kproxy/refbroker/store"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// trustingPool starts two stub brokers that store produce data without
// checking it (broker.Config.TrustProduce, as KafScale's brokers do) and a
// proxy in front of them at validation level; it returns the proxy's
// address and its metrics registry.
func trustingPool(t *testing.T, level recordcheck.Level, partitions int32) (string, *prometheus.Registry) {
	t.Helper()
	return stubPool(t, partitions,
		func(c *broker.Config) { c.TrustProduce = true },
		func(c *assembly.Config) { c.ProduceValidation = level })
}

// stubPool starts two stub brokers with partitions per auto-created topic
// (brokerCfg and proxyCfg adjust their configs) and a proxy in front of
// them, waits until the proxy is ready, and returns its address and
// metrics registry. Everything stops at the test's cleanup.
func stubPool(t *testing.T, partitions int32, brokerCfg func(*broker.Config), proxyCfg func(*assembly.Config)) (string, *prometheus.Registry) {
	t.Helper()
	etcd, cli := etcdtest.Start(t)
	lay := layout.New("")
	st := store.NewMemory()
	for id := int32(1); id <= 2; id++ {
		bc := broker.Config{
			ID: id, Etcd: etcdtest.NewClient(t, etcd.Endpoint), Layout: lay, Store: st, LeaseTTL: 5 * time.Second,
			AutoCreateTopics: true, DefaultPartitions: partitions,
		}
		brokerCfg(&bc)
		b, err := broker.New(context.Background(), bc)
		if err != nil {
			t.Fatal(err)
		}
		runUntilCleanup(t, fmt.Sprint("broker ", id), b.Run)
	}
	reg := prometheus.NewRegistry()
	pc := assembly.Config{
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", Etcd: cli, Layout: lay,
		AutoCreateTopics: true, DefaultPartitions: partitions, Registry: reg,
	}
	proxyCfg(&pc)
	s, err := assembly.New(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, "proxy", s.Run)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adminapi.WaitReady(ctx, s.AdminAddr(), 2); err != nil {
		t.Fatal(err)
	}
	return s.Addr(), reg
}

// Hostile record data, each what a broken or hostile client could send in
// a Produce v3 or later (v9 here).

func hostileBatch(values ...string) []byte {
	return kwiretest.Batch{ProducerID: -1, LeaderEpoch: -1, FirstTimestamp: time.Now().UnixMilli(), Values: kwiretest.Values(values...)}.Encode()
}

// withCRC recomputes the CRC-32C of a batch whose header was edited, so
// that the edit alone is wrong.
func withCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func withAttrs(b []byte, attrs uint16) []byte {
	binary.BigEndian.PutUint16(b[21:], attrs)
	return withCRC(b)
}

// legacyMessages is a magic-0 or -1 message set, as librdkafka sends with
// MsgVer2 off: what KafScale stored as if it were a v2 batch.
func legacyMessages(magic byte, n int) []byte {
	var out []byte
	for i := range n {
		m := binary.BigEndian.AppendUint32(nil, 0) // crc (not checked by anyone here)
		m = append(m, magic, 0)
		if magic == 1 {
			m = binary.BigEndian.AppendUint64(m, uint64(time.Now().UnixMilli()))
		}
		v := fmt.Sprintf("legacy-%d", i)
		m = binary.BigEndian.AppendUint32(m, 0xffffffff) // null key
		m = binary.BigEndian.AppendUint32(m, uint32(len(v)))
		m = append(m, v...)
		out = binary.BigEndian.AppendUint64(out, uint64(i))
		out = binary.BigEndian.AppendUint32(out, uint32(len(m)))
		out = append(out, m...)
	}
	return out
}

type hostileCase struct {
	name    string
	records []byte
	code    int16
	reason  recordcheck.Reason
}

func hostileCases() []hostileCase {
	good := hostileBatch("h1", "h2", "h3")
	wrongCRC := bytes.Clone(good)
	wrongCRC[len(wrongCRC)-1] ^= 0x40
	short := bytes.Clone(good) // length says 20 bytes fewer: the rest trails
	binary.BigEndian.PutUint32(short[8:], uint32(len(short)-12-20))
	long := bytes.Clone(good) // length says 20 bytes more than were sent
	binary.BigEndian.PutUint32(long[8:], uint32(len(long)-12+20))
	// A batch of whole Blocks of the frame's CRC sums (crc32c.Block): its
	// CRC is combined from the sums taken as the frame arrived.
	large := make([]string, 16)
	for i := range large {
		large[i] = strings.Repeat(fmt.Sprint(i), 1<<10)
	}
	wrongLarge := hostileBatch(large...)
	wrongLarge[len(wrongLarge)/2] ^= 0x40
	txnless := hostileBatch("t")
	binary.BigEndian.PutUint64(txnless[43:], 77) // producer id
	binary.BigEndian.PutUint16(txnless[51:], 0)  // epoch
	binary.BigEndian.PutUint32(txnless[53:], 0)  // base sequence
	return []hostileCase{
		{"magic 0 set", legacyMessages(0, 10), kerr.InvalidRecord.Code, recordcheck.Magic},
		{"magic 1 set", legacyMessages(1, 10), kerr.InvalidRecord.Code, recordcheck.Magic},
		{"truncated batch", good[:len(good)-7], kerr.InvalidRecord.Code, recordcheck.Truncated},
		{"wrong crc", wrongCRC, kerr.CorruptMessage.Code, recordcheck.CRC},
		{"wrong crc inside a large batch", wrongLarge, kerr.CorruptMessage.Code, recordcheck.CRC},
		{"length shorter than the batch", short, kerr.CorruptMessage.Code, recordcheck.TrailingBytes},
		{"length longer than the batch", long, kerr.InvalidRecord.Code, recordcheck.Truncated},
		{"control batch", withAttrs(bytes.Clone(good), 0x20), kerr.InvalidRecord.Code, recordcheck.ControlBatch},
		{"transactional without a transactional id", withAttrs(txnless, 0x10), kerr.TransactionalIDAuthorizationFailed.Code, recordcheck.TransactionalNoID},
	}
}

// produceParts sends one Produce (v9: kgo at Kafka 3.0's versions names
// topics) with records per partition and returns each partition's answer.
func produceParts(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, recs map[int32][]byte) map[int32]kmsg.ProduceResponseTopicPartition {
	t.Helper()
	out, err := testrig.ProduceRaw(ctx, cl, topic, recs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func badInputCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kproxy_bad_input_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestProduceValidationHostile sends every hostile case through the proxy
// to a pool whose brokers store whatever they get: each hostile partition
// is refused with Kafka's code and counted, the valid partition of the same
// request is acknowledged (except where Kafka fails the whole request), and
// afterwards every partition reads back every acknowledged record, those
// written after the hostile ones included, with kgo and with kcat.
func TestProduceValidationHostile(t *testing.T) {
	cases := append(hostileCases(), probeCases(t)...)
	parts := int32(len(cases) + 1) // one partition per case, the last one for valid data
	addr, reg := trustingPool(t, recordcheck.Full, parts)
	const topic = "hostile"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(newClient(t, addr)).CreateTopic(ctx, parts, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	producer := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var acked []record
	produceEach := func(round string) {
		for p := range parts {
			r := &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "%s-%d", round, p)}
			if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %s to partition %d: %v", round, p, err)
			}
			acked = append(acked, record{r.Partition, r.Offset, string(r.Value)})
		}
	}
	produceEach("before")

	raw := newClient(t, addr, kgo.MaxVersions(kversion.V3_0_0()))
	goodPart := parts - 1
	for i, c := range cases {
		p := int32(i)
		// Large, so that its CRC comes from the frame's sums too.
		value := fmt.Sprint("beside-", p, "-", strings.Repeat("v", 16<<10))
		got := produceParts(ctx, t, raw, topic, map[int32][]byte{p: c.records, goodPart: hostileBatch(value)})
		if code := got[p].ErrorCode; code != c.code {
			t.Errorf("%s: partition %d answered %v, want %v", c.name, p, kerr.ErrorForCode(code), kerr.ErrorForCode(c.code))
		}
		wantBeside := int16(0)
		if c.reason == recordcheck.TransactionalNoID {
			wantBeside = c.code // Kafka fails the whole request
		}
		switch beside := got[goodPart]; {
		case beside.ErrorCode != wantBeside:
			t.Errorf("%s: the valid partition beside it answered %v, want %v", c.name, kerr.ErrorForCode(beside.ErrorCode), kerr.ErrorForCode(wantBeside))
		case beside.ErrorCode == 0:
			acked = append(acked, record{goodPart, beside.BaseOffset, value})
		}
		if n := badInputCount(t, reg, c.reason.String()); n < 1 {
			t.Errorf("%s: kproxy_bad_input_total{reason=%q} = %v", c.name, c.reason, n)
		}
	}
	produceEach("after")
	checkSame(t, acked, consumeAll(t, addr, topic, len(acked), 60*time.Second))
	checkSame(t, acked, kcatConsume(t, addr, topic, 60*time.Second))
}

// TestProduceValidationPoolTrusts checks the premise of the test above:
// with validation off, the pool acknowledges a magic-0 set in Produce v9,
// which a Kafka broker refuses.
func TestProduceValidationPoolTrusts(t *testing.T) {
	addr, _ := trustingPool(t, recordcheck.Off, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "trusted"
	if _, err := kadm.NewClient(newClient(t, addr)).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	// A valid record first: acknowledged once the proxy routes the topic.
	if err := newClient(t, addr).ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	raw := newClient(t, addr, kgo.MaxVersions(kversion.V3_0_0()))
	got := produceParts(ctx, t, raw, topic, map[int32][]byte{0: legacyMessages(0, 10)})
	if code := got[0].ErrorCode; code != 0 {
		t.Fatalf("with validation off the pool answered %v to a magic-0 set; the hostile test needs a pool that stores it", kerr.ErrorForCode(code))
	}
}
