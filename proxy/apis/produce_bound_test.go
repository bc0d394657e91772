package apis

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceEncodedSizeBound: the presized encode buffer must hold every
// encoding, or AppendTo grows it and copies megabytes of batches again.
func TestProduceEncodedSizeBound(t *testing.T) {
	txn := "txn-id"
	for v := int16(0); v <= kmsg.NewPtrProduceRequest().MaxVersion(); v++ {
		for _, shape := range []struct{ topics, parts, recBytes, nameLen int }{
			{1, 1, 0, 1}, {1, 16, 1024, 10}, {3, 100, 70_000, 249}, {300, 1, 10, 30},
		} {
			for _, withTxn := range []bool{false, true} {
				o := &produceOp{}
				o.enc.Version = v
				if withTxn {
					o.enc.TransactionID = &txn
				}
				for ti := 0; ti < shape.topics; ti++ {
					tp := kmsg.NewProduceRequestTopic()
					tp.Topic = strings.Repeat("t", shape.nameLen)
					for pi := 0; pi < shape.parts; pi++ {
						p := kmsg.NewProduceRequestTopicPartition()
						p.Partition = int32(pi)
						p.Records = make([]byte, shape.recBytes)
						tp.Partitions = append(tp.Partitions, p)
					}
					o.enc.Topics = append(o.enc.Topics, tp)
				}
				if n, bound := len(o.enc.AppendTo(nil)), o.encodedSizeBound(); n > bound {
					t.Fatalf("v%d %+v txn=%v: encoded %d bytes, bound %d", v, shape, withTxn, n, bound)
				}
			}
		}
	}
}
