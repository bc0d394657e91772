package apis

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestVecEncoderMatchesKmsg: for every Fetch version, the pieces joined are
// byte for byte what kmsg encodes, and the large record sets are the
// brokers' own slices (not copies).
func TestVecEncoderMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	e := &vecEncoder{}
	for i := range e.secret {
		e.secret[i] = byte(rng.Uint32())
	}
	for v := int16(0); v <= kmsg.NewPtrFetchResponse().MaxVersion(); v++ {
		for _, sizes := range [][]int{
			{},                               // nothing large: one piece
			{vecMinBytes},                    // the smallest left out
			{0, 10, vecMinBytes - 1, 70_000}, // inline and left out mixed
			{200_000, 5, 1 << 20, 0, vecMinBytes + 1},
		} {
			t.Run(fmt.Sprintf("v%d/%v", v, sizes), func(t *testing.T) {
				resp := fetchAnswer(rng, v, sizes)
				want := resp.AppendTo(nil)
				dst := []byte("prefix")
				skel, parts, ok := e.encodeFetch(resp, dst)
				if !ok {
					t.Fatal("markers not found")
				}
				if !bytes.Equal(skel[:len(dst)], dst) {
					t.Fatal("dst clobbered")
				}
				got := skel[len(dst):]
				if parts != nil { // pieces of what encode appended
					got = bytes.Join(parts, nil)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("pieces joined (%d bytes) differ from kmsg's encoding (%d bytes)", len(got), len(want))
				}
				if again := resp.AppendTo(nil); !bytes.Equal(again, want) {
					t.Fatal("encode left the response changed")
				}
				large := 0
				for _, n := range sizes {
					if n >= vecMinBytes {
						large++
					}
				}
				shared := 0
				for _, p := range parts {
					for _, r := range recordSets(resp) {
						if len(p) > 0 && len(r) == len(p) && &p[0] == &r[0] {
							shared++
						}
					}
				}
				if shared != large {
					t.Fatalf("%d pieces are the brokers' record sets, want %d", shared, large)
				}
			})
		}
	}
}

// TestVecEncoderIgnoresForgedMarkers: record data that stays inline and
// holds something marker-shaped (without the secret) changes nothing.
func TestVecEncoderIgnoresForgedMarkers(t *testing.T) {
	e := &vecEncoder{}
	copy(e.secret[:], "0123456789ab")
	rng := rand.New(rand.NewPCG(3, 4))
	resp := fetchAnswer(rng, 12, []int{100, vecMinBytes})
	forged := append([]byte("0123456789aX"), 0, 0, 0, 0)
	copy(resp.Topics[0].Partitions[0].RecordBatches, forged)
	want := resp.AppendTo(nil)
	_, parts, ok := e.encodeFetch(resp, nil)
	if !ok || !bytes.Equal(bytes.Join(parts, nil), want) {
		t.Fatalf("ok %v; pieces differ from kmsg's encoding", ok)
	}
}

// fetchAnswer builds a response of version v with one partition per size
// (spread over two topics), with every optional field set that the
// version has.
func fetchAnswer(rng *rand.Rand, v int16, sizes []int) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = v
	resp.ThrottleMillis = 7
	for i, n := range sizes {
		if i%2 == 0 || len(resp.Topics) == 0 {
			t := kmsg.NewFetchResponseTopic()
			t.Topic = fmt.Sprintf("topic-%d", i)
			t.TopicID = [16]byte{byte(i + 1)}
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition = int32(i)
		p.HighWatermark = int64(rng.Uint32())
		p.LastStableOffset = p.HighWatermark
		p.LogStartOffset = 3
		p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 9, FirstOffset: 1}}
		p.CurrentLeader.LeaderID = 1
		p.CurrentLeader.LeaderEpoch = 4
		p.RecordBatches = make([]byte, n)
		for j := range p.RecordBatches {
			p.RecordBatches[j] = byte(rng.Uint32())
		}
		t := &resp.Topics[len(resp.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	return resp
}

func recordSets(resp *kmsg.FetchResponse) [][]byte {
	var out [][]byte
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.RecordBatches)
		}
	}
	return out
}

// TestMergedFetchLeavesRecordsInPlace: a fetch spanning three brokers with
// large record sets is answered in pieces that reference the brokers'
// answers, those answers stay untouched until the reply is released, and
// the pieces join into a valid answer with every broker's records.
func TestMergedFetchLeavesRecordsInPlace(t *testing.T) {
	for _, v := range []int16{11, 12} { // before and after flexible versions
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			d, f, _ := newTestDispatcher(t)
			records := func(broker, part int32) []byte {
				return bytes.Repeat([]byte{byte(broker), byte(part)}, vecMinBytes)
			}
			for b := int32(1); b <= 3; b++ {
				f.on(b, kmsg.Fetch, func(_ int, req kmsg.Request) fakeReply {
					resp := f.okResponse(b, req).(*kmsg.FetchResponse)
					for ti := range resp.Topics {
						for pi := range resp.Topics[ti].Partitions {
							p := &resp.Topics[ti].Partitions[pi]
							p.RecordBatches = records(b, p.Partition)
						}
					}
					return fakeReply{resp: resp}
				})
			}
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.MaxWaitMillis, req.MinBytes = v, 500, 1<<30 // wait for every broker
			rt := kmsg.FetchRequestTopic{Topic: "t", TopicID: topicID("t")}
			for p := range int32(6) { // owners 1, 2, 3, 1, 2, 3
				fp := kmsg.NewFetchRequestTopicPartition()
				fp.Partition, fp.PartitionMaxBytes = p, 1<<20
				rt.Partitions = append(rt.Partitions, fp)
			}
			req.Topics = append(req.Topics, rt)
			reply, err := call(t, d, req)
			if err != nil {
				t.Fatal(err)
			}
			if reply.Parts == nil || reply.Release == nil {
				t.Fatalf("merged fetch answered whole (%d bytes), want pieces and a Release", len(reply.Body))
			}
			resp := decodeReply(t, req, replyBytes(reply)).(*kmsg.FetchResponse)
			n := 0
			for _, rt := range resp.Topics {
				for _, p := range rt.Partitions {
					n++
					if want := records(1+p.Partition%3, p.Partition); !bytes.Equal(p.RecordBatches, want) {
						t.Fatalf("partition %d: records of %d bytes differ from its owner's", p.Partition, len(p.RecordBatches))
					}
				}
			}
			if n != 6 {
				t.Fatalf("%d partitions answered, want 6", n)
			}
			reply.Release() // the fakes scribble over their answers now
			if n := bytes.Count(replyBytes(reply), []byte{0xEE}); n < 6*2*vecMinBytes {
				t.Fatalf("%d bytes scribbled after Release, want all %d record bytes: the pieces copied the brokers' records", n, 6*2*vecMinBytes)
			}
		})
	}
}
