package broker

import (
	"context"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/refbroker/broker/partlog"
)

// clusterID is what every stub broker of one layout reports.
func (b *Broker) clusterID() *string {
	id := "kproxy" + b.cfg.Layout.Prefix()
	return &id
}

// brokers lists the live brokers (this one always included) for Metadata
// and DescribeCluster, and the controller id (the lowest live id).
func (b *Broker) brokers() ([]kmsg.MetadataResponseBroker, int32) {
	live := b.meta.liveBrokers()
	out := make([]kmsg.MetadataResponseBroker, 0, len(live)+1)
	self := false
	for _, bi := range live {
		host, port := splitHostPort(bi.Addr)
		out = append(out, kmsg.MetadataResponseBroker{NodeID: bi.ID, Host: host, Port: port, Rack: rackOf(bi.Rack)})
		self = self || bi.ID == b.cfg.ID
	}
	if !self {
		host, port := splitHostPort(b.addr)
		out = append(out, kmsg.MetadataResponseBroker{NodeID: b.cfg.ID, Host: host, Port: port, Rack: rackOf(b.cfg.Rack)})
	}
	controller := out[0].NodeID
	for _, br := range out {
		controller = min(controller, br.NodeID)
	}
	return out, controller
}

func splitHostPort(addr string) (string, int32) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	port, _ := strconv.ParseInt(p, 10, 32)
	return host, int32(port)
}

func (b *Broker) handleMetadata(ctx context.Context, _ *conn, _ header, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.Brokers, resp.ControllerID = b.brokers()
	resp.ClusterID = b.clusterID()
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, name := range b.meta.topicNames() {
			if t, ok := b.meta.topic(name); ok {
				resp.Topics = append(resp.Topics, b.topicMetadata(t))
			}
		}
		return resp
	}
	autoCreate := b.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	for _, rt := range req.Topics {
		resp.Topics = append(resp.Topics, b.requestedTopic(ctx, rt, autoCreate))
	}
	return resp
}

func (b *Broker) requestedTopic(ctx context.Context, rt kmsg.MetadataRequestTopic, autoCreate bool) kmsg.MetadataResponseTopic {
	if rt.Topic == nil {
		if t, ok := b.meta.topicByID(rt.TopicID); ok {
			return b.topicMetadata(t)
		}
		return kmsg.MetadataResponseTopic{ErrorCode: kerr.UnknownTopicID.Code, TopicID: rt.TopicID}
	}
	name := *rt.Topic
	if t, ok := b.meta.topic(name); ok {
		return b.topicMetadata(t)
	}
	if t, ok := b.topicFromEtcd(ctx, name); ok {
		return b.topicMetadata(t) // created elsewhere; the watch has not caught up yet
	}
	missing := kmsg.NewMetadataResponseTopic()
	missing.Topic = rt.Topic
	if err := validTopicName(name); err != nil {
		missing.ErrorCode = kerr.InvalidTopicException.Code
		return missing
	}
	if !autoCreate {
		missing.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return missing
	}
	t, code, err := b.createTopic(ctx, name, b.cfg.DefaultPartitions, nil, false)
	if code != 0 && code != kerr.TopicAlreadyExists.Code {
		b.log.Warn("auto-create topic", "topic", name, "err", err)
		missing.ErrorCode = code
		return missing
	}
	if code == kerr.TopicAlreadyExists.Code {
		var ok bool
		if t, ok = b.meta.topic(name); !ok {
			missing.ErrorCode = kerr.LeaderNotAvailable.Code // created elsewhere just now
			return missing
		}
	}
	return b.topicMetadata(t)
}

func (b *Broker) topicMetadata(t topicMeta) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.info.Name
	mt.Topic = &name
	mt.TopicID = t.id
	for p := int32(0); p < t.info.Partitions; p++ {
		leader, epoch, owned := b.meta.leader(partlog.TP{Topic: name, Partition: p}, b.cfg.ID)
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p
		mp.Leader = leader
		mp.LeaderEpoch = epoch
		if !owned {
			// The next owner will bump the epoch; a client holding the
			// current one would be fenced at once and (kgo) wait out its
			// metadata min age. -1 means "unknown": no epoch checks.
			mp.LeaderEpoch = -1
		}
		mp.Replicas = []int32{leader}
		mp.ISR = []int32{leader}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// rackOf is a broker's rack as Metadata carries it (null: none).
func rackOf(rack string) *string {
	if rack == "" {
		return nil
	}
	return &rack
}

func (b *Broker) handleDescribeCluster(_ context.Context, _ *conn, _ header, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	brokers, controller := b.brokers()
	resp.ClusterID = *b.clusterID()
	resp.ControllerID = controller
	for _, br := range brokers {
		resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: br.NodeID, Host: br.Host, Port: br.Port, Rack: br.Rack})
	}
	return resp
}

func (b *Broker) handleFindCoordinator(_ context.Context, _ *conn, _ header, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID, c.Host, c.Port = -1, "", -1
		switch req.CoordinatorType {
		case 0:
			id := b.meta.coordinator(key, b.cfg.ID)
			host, port, ok := b.brokerAddr(id)
			if !ok { // owner not registered (yet): this broker will do
				id = b.cfg.ID
				host, port, _ = b.brokerAddr(id)
			}
			c.NodeID, c.Host, c.Port = id, host, port
		default:
			// Not retriable on purpose: a transactional client must fail
			// fast instead of looking for a coordinator that never comes.
			c.ErrorCode = kerr.InvalidRequest.Code
			msg := "only consumer group coordinators exist on this broker (no transactions, no share groups)"
			c.ErrorMessage = &msg
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
	}
	return resp
}

// brokerAddr is the advertised host and port of a live broker.
func (b *Broker) brokerAddr(id int32) (string, int32, bool) {
	if id == b.cfg.ID {
		host, port := splitHostPort(b.addr)
		return host, port, true
	}
	for _, bi := range b.meta.liveBrokers() {
		if bi.ID == id {
			host, port := splitHostPort(bi.Addr)
			return host, port, true
		}
	}
	return "", 0, false
}

// topicFromEtcd looks a topic the meta view does not know up in etcd and,
// if it exists, waits (bounded) for the view to catch up.
func (b *Broker) topicFromEtcd(ctx context.Context, name string) (topicMeta, bool) {
	if validTopicName(name) != nil {
		return topicMeta{}, false
	}
	resp, err := b.cfg.Etcd.Get(ctx, b.cfg.Layout.TopicKey(name))
	if err != nil || len(resp.Kvs) == 0 {
		return topicMeta{}, false
	}
	b.awaitMeta(ctx, resp.Kvs[0].ModRevision)
	return b.meta.topic(name)
}
