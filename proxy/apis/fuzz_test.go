package apis

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzSeeds are requests of every split adapter, each aimed at partitions
// of several brokers, so that mutations start inside the splitting code.
func fuzzSeeds() []kmsg.Request {
	parts := []int32{0, 1, 2, 5}
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks, produce.TimeoutMillis = -1, 1000
	for _, p := range parts {
		pt := kmsg.NewProduceRequestTopicPartition()
		pt.Partition, pt.Records = p, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 0, 0, 0, 0, 2}
		produce.Topics = append(produce.Topics, kmsg.ProduceRequestTopic{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{pt}})
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis, fetch.MaxBytes = 10, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "t", topicID("t")
	list := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "t"
	epoch := kmsg.NewPtrOffsetForLeaderEpochRequest()
	et := kmsg.NewOffsetForLeaderEpochRequestTopic()
	et.Topic = "t"
	del := kmsg.NewPtrDeleteRecordsRequest()
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "t"
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = "g1"
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "t"
	ofetch := kmsg.NewPtrOffsetFetchRequest()
	ofetch.Group = "g2"
	oft := kmsg.NewOffsetFetchRequestTopic()
	oft.Topic, oft.Partitions = "t", parts
	for _, p := range parts {
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.PartitionMaxBytes = p, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = p, -1
		lt.Partitions = append(lt.Partitions, lp)
		ep := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		ep.Partition, ep.LeaderEpoch = p, 5
		et.Partitions = append(et.Partitions, ep)
		dp := kmsg.NewDeleteRecordsRequestTopicPartition()
		dp.Partition, dp.Offset = p, 1
		dt.Partitions = append(dt.Partitions, dp)
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Partition, cp.Offset = p, 3
		ct.Partitions = append(ct.Partitions, cp)
	}
	fetch.Topics = []kmsg.FetchRequestTopic{ft}
	list.Topics = []kmsg.ListOffsetsRequestTopic{lt}
	epoch.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{et}
	del.Topics = []kmsg.DeleteRecordsRequestTopic{dt}
	commit.Topics = []kmsg.OffsetCommitRequestTopic{ct}
	ofetch.Topics = []kmsg.OffsetFetchRequestTopic{oft}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}, {Topic: kmsg.StringPtr("u")}}
	return []kmsg.Request{produce, fetch, list, epoch, del, commit, ofetch, meta, kmsg.NewPtrFindCoordinatorRequest(), kmsg.NewPtrListGroupsRequest()}
}

// FuzzDispatch feeds the dispatcher arbitrary bodies for any key and
// version. It must never panic or hang; every sub-request it sends must
// decode (the fake broker checks); and a reply it gives must decode at the
// request's version.
func FuzzDispatch(f *testing.F) {
	for _, req := range fuzzSeeds() {
		for _, v := range []int16{0, req.MaxVersion() / 2, req.MaxVersion()} {
			req.SetVersion(v)
			f.Add(int16(req.Key()), v, req.AppendTo(nil))
		}
	}
	d, _, _ := newTestDispatcher(f)
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		reply, err := d.Begin(ctx, 1, Header{Key: key, Version: version, CorrelationID: 1}, body).Finish(ctx)
		defer func() {
			if reply.Release != nil {
				reply.Release()
			}
		}()
		if err != nil || reply.NoResponse || key == int16(kmsg.ApiVersions) {
			return // refused (the connection closes) or not answered; ApiVersions may fall back to v0
		}
		req := kmsg.RequestForKey(key)
		resp := req.ResponseKind()
		resp.SetVersion(version)
		if derr := resp.ReadFrom(replyBytes(reply)); derr != nil {
			t.Fatalf("%s v%d: reply does not decode: %v", kmsg.NameForKey(key), version, derr)
		}
	})
}
