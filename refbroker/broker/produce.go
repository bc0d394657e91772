package broker

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/refbroker/broker/partlog"
)

// queuedAppend is one partition of a produce request waiting for its
// appender.
type queuedAppend struct {
	topic, part int
	tp          partlog.TP
	result      <-chan partlog.Result
}

// beginProduce validates a produce request and queues every valid partition
// to its appender before returning, which is what keeps one connection's
// produces in order. The returned func waits for the outcomes.
func (b *Broker) beginProduce(ctx context.Context, req *kmsg.ProduceRequest) func(context.Context) kmsg.Response {
	b.metrics.produceRequest()
	for _, name := range b.unknownProduceTopics(req) {
		if err := b.syncTopic(ctx, name); err != nil {
			b.log.Warn("produce names a topic or partition this broker does not know", "err", err)
		}
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	var queued []queuedAppend
	for ti, rt := range req.Topics {
		st := &resp.Topics[ti]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = strings.Clone(rt.Topic), rt.TopicID
		name, topicCode := b.produceTopic(req.Version, rt)
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			sp := &st.Partitions[pi]
			*sp = kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = rp.Partition, -1, -1, -1
			tp := partlog.TP{Topic: name, Partition: rp.Partition}
			code, msg := b.checkProduce(req, tp, topicCode)
			if code == 0 {
				parse := partlog.ParseProduce
				if b.cfg.TrustProduce {
					parse = partlog.ParseTrusting
				}
				batches, berr := parse(rp.Records)
				if berr != nil {
					code, msg = berr.Code, berr.Msg
				} else {
					queued = append(queued, queuedAppend{topic: ti, part: pi, tp: tp, result: b.logs.Append(tp, batches)})
					continue
				}
			}
			b.log.Debug("produce refused", "topic", name, "partition", rp.Partition, "code", code, "why", msg)
			b.setProduceError(req.Version, resp, sp, tp, code, msg)
		}
	}
	return func(ctx context.Context) kmsg.Response {
		for _, q := range queued {
			var r partlog.Result
			select {
			case r = <-q.result:
			case <-ctx.Done():
				return nil
			}
			sp := &resp.Topics[q.topic].Partitions[q.part]
			if r.Code != 0 {
				b.setProduceError(req.Version, resp, sp, q.tp, r.Code, r.Msg)
				continue
			}
			sp.BaseOffset, sp.LogStartOffset = r.BaseOffset, r.LogStart
		}
		return resp
	}
}

// unknownProduceTopics lists the topics (named, not by id) of req that the
// metadata view does not know, or knows with too few partitions.
func (b *Broker) unknownProduceTopics(req *kmsg.ProduceRequest) []string {
	if req.Version >= 13 {
		return nil // by id: only the view maps ids to names
	}
	var out []string
	for _, rt := range req.Topics {
		t, ok := b.meta.topic(rt.Topic)
		for _, rp := range rt.Partitions {
			if !ok || rp.Partition >= t.info.Partitions {
				out = append(out, strings.Clone(rt.Topic))
				break
			}
		}
	}
	return out
}

// produceTopic resolves the topic name (by id from v13) and says whether
// the topic exists.
func (b *Broker) produceTopic(version int16, rt kmsg.ProduceRequestTopic) (string, int16) {
	if version >= 13 {
		t, ok := b.meta.topicByID(rt.TopicID)
		if !ok {
			return "", kerr.UnknownTopicID.Code
		}
		return t.info.Name, 0
	}
	name := strings.Clone(rt.Topic) // the request aliases its frame
	if _, ok := b.meta.topic(name); !ok {
		return name, kerr.UnknownTopicOrPartition.Code
	}
	return name, 0
}

func (b *Broker) checkProduce(req *kmsg.ProduceRequest, tp partlog.TP, topicCode int16) (int16, string) {
	switch {
	case topicCode != 0:
		return topicCode, "unknown topic"
	case req.TransactionID != nil:
		return kerr.UnsupportedVersion.Code, "transactional produce is not supported by this broker"
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		return kerr.InvalidRequiredAcks.Code, "acks must be 0, 1 or -1"
	case !b.meta.partitionExists(tp):
		return kerr.UnknownTopicOrPartition.Code, "unknown partition"
	}
	return 0, ""
}

// setProduceError fills an error answer; NOT_LEADER_OR_FOLLOWER carries the
// current leader (KIP-951) from v10 on when another broker owns the
// partition.
func (b *Broker) setProduceError(version int16, resp *kmsg.ProduceResponse, sp *kmsg.ProduceResponseTopicPartition, tp partlog.TP, code int16, msg string) {
	sp.ErrorCode = code
	if version >= 8 && msg != "" {
		sp.ErrorMessage = &msg
	}
	if code != kerr.NotLeaderForPartition.Code || version < 10 {
		return
	}
	leader, epoch, owned := b.meta.leader(tp, b.cfg.ID)
	if !owned || leader == b.cfg.ID {
		return
	}
	for _, br := range resp.Brokers {
		if br.NodeID == leader {
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
			return
		}
	}
	host, port, ok := b.brokerAddr(leader)
	if !ok {
		return
	}
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
	resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: leader, Host: host, Port: port})
}
