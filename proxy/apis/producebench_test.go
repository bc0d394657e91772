package apis

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire/kwiretest"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck/probe"
)

// BenchmarkProduceValidation is a Produce of 6 partitions (one broker),
// each a valid uncompressed batch of 16 records of 1 KiB, through the
// dispatcher at each validation level: full against off is the proxy's
// own cost of validation per byte (without the syscalls the proxy also
// pays, so the ratio is higher than on the wire).
func BenchmarkProduceValidation(b *testing.B) {
	parts := []int32{0, 3, 6, 9, 12, 15}
	vs := make([][]byte, 16)
	for i := range vs {
		vs[i] = bytes.Repeat([]byte{byte('a' + i)}, 1024)
	}
	batch := kwiretest.Batch{ProducerID: -1, LeaderEpoch: -1, Values: vs}.Encode()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 5000
	topic := kmsg.ProduceRequestTopic{Topic: "t"}
	for _, p := range parts {
		topic.Partitions = append(topic.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p, Records: batch})
	}
	req.Topics = []kmsg.ProduceRequestTopic{topic}
	body := req.AppendTo(nil)
	for _, l := range []recordcheck.Level{recordcheck.Off, recordcheck.Framing, recordcheck.Full} {
		b.Run(l.String(), func(b *testing.B) {
			runProduce(b, validatingDispatcher(b, parts, l), body)
		})
	}
}

// BenchmarkProduceEncrypted is a Produce of one partition of an encrypted
// topic, a batch of 1,000 compressible records of 1 KiB (about 1 MB) in
// each codec, through the dispatcher at validation full and off: full
// against off is what validation adds when encryption decompresses the
// batch anyway.
func BenchmarkProduceEncrypted(b *testing.B) {
	var raw []byte
	for i := range 1000 {
		v := []byte(fmt.Sprintf("%0256d", i))
		for len(v) < 1024 {
			v = append(v, "kproxy record value "...)
		}
		raw = append(raw, probe.Record(int32(i), v[:1024])...)
	}
	for _, codec := range probe.Codecs() {
		batch := probe.Framed(codec.ID, 1000, 999, probe.Compress(codec.ID, raw))
		body := produceOf(-1, map[int32][]byte{0: batch}).AppendTo(nil)
		for _, l := range []recordcheck.Level{recordcheck.Full, recordcheck.Off} {
			b.Run(codec.Name+"/"+l.String(), func(b *testing.B) {
				d := validatingDispatcher(b, []int32{0}, l)
				d.cfg.Encryption = encryptT(b, nil)
				runProduce(b, d, body)
			})
		}
	}
}

// validatingDispatcher is a canned Produce dispatcher for parts whose
// produce validation runs at level l.
func validatingDispatcher(b *testing.B, parts []int32, l recordcheck.Level) *Dispatcher {
	d, _ := cannedDispatcher(b, testTable(), kmsg.Produce, 9, parts, 0)
	d.pg.Close()
	cfg := d.cfg
	cfg.ProduceValidation = l
	var err error
	if d.pg, err = newProduceGuard(cfg); err != nil {
		b.Fatal(err)
	}
	return d
}
