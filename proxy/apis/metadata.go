package apis

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/authrule"
	"github.com/kproxy/kproxy/routing"
)

// The proxy is the only broker clients see: Metadata, FindCoordinator and
// DescribeCluster are answered here, naming the proxy (NodeID at the
// advertised address of the client's listener, the same on every replica) as every partition's
// leader, every group's coordinator and the controller.

// metadataOp waits for auto-created topics to appear in routing.
type metadataOp struct {
	d       *Dispatcher
	ep      endpoint // the client's listener's advertised address
	g       authrule.Guard
	denied  map[string]int16 // named topics the principal may not see or create
	req     *kmsg.MetadataRequest
	pending Pending  // the CreateTopics sent to a broker
	sendErr error    // CreateTopics could not be sent
	created []string // topics being created
}

func (d *Dispatcher) beginMetadata(ctx context.Context, _ uint64, h Header, body []byte) (op, Reply, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = h.Version
	if err := req.ReadFrom(body); err != nil {
		return nil, Reply{}, fmt.Errorf("decode: %w", err)
	}
	g := d.guard(ctx, h.Key)
	missing := d.toCreate(req)
	denied := g.MetadataDenied(req, missing)
	missing = slices.DeleteFunc(missing, func(t string) bool { return denied[t] != 0 })
	if len(missing) == 0 {
		return nil, Reply{Body: d.metadataAnswer(d.endpoint(ctx), req, denied, g)}, nil
	}
	o := &metadataOp{d: d, ep: d.endpoint(ctx), g: g, req: req, created: missing, denied: denied}
	o.pending, o.sendErr = d.createTopics(ctx, missing)
	return o, Reply{}, nil
}

// toCreate lists the unknown, validly named topics the request may create.
func (d *Dispatcher) toCreate(req *kmsg.MetadataRequest) []string {
	allow := req.Version < 4 || req.AllowAutoTopicCreation
	if !d.cfg.AutoCreateTopics || !allow {
		return nil
	}
	var out []string
	for _, t := range req.Topics {
		if t.Topic == nil || !validTopic(*t.Topic) {
			continue
		}
		if _, ok := d.routes.Topic(*t.Topic); !ok {
			out = append(out, *t.Topic)
		}
	}
	return out
}

// validTopic is Kafka's topic name rule.
func validTopic(name string) bool {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// createTopics asks one broker to create topics with the default
// partition count and the broker's default replication.
func (d *Dispatcher) createTopics(ctx context.Context, topics []string) (Pending, error) {
	broker, ok := d.routes.AnyBroker(topics[0], -1)
	if !ok {
		return nil, fmt.Errorf("create topics: no live broker")
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = min(d.vers.current().get(int16(kmsg.CreateTopics)).max, req.MaxVersion())
	if req.Version < 0 {
		return nil, fmt.Errorf("create topics: brokers do not serve CreateTopics")
	}
	req.TimeoutMillis = int32(d.cfg.AutoCreateWait.Milliseconds())
	for _, name := range topics {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = name
		t.NumPartitions = d.cfg.DefaultPartitions
		t.ReplicationFactor = -1
		if req.Version < 4 {
			t.ReplicationFactor = 1 // -1 (broker default) needs v4
		}
		req.Topics = append(req.Topics, t)
	}
	return d.send(ctx, broker, 0, Header{Key: req.Key(), Version: req.Version}, req, Raw(req.AppendTo(nil)))
}

func (o *metadataOp) finish(ctx context.Context) (Reply, error) {
	ctx, cancel := context.WithTimeout(ctx, o.d.cfg.AutoCreateWait)
	defer cancel()
	failed := o.denied
	if failed == nil {
		failed = map[string]int16{}
	}
	if o.sendErr == nil {
		o.sendErr = o.createResult(ctx, failed)
	}
	if o.sendErr != nil {
		o.d.log.Warn("auto-create topics failed", "topics", o.created, "err", o.sendErr)
	} else {
		o.awaitTopics(ctx, failed)
	}
	for _, t := range o.created {
		if _, ok := o.d.routes.Topic(t); !ok && failed[t] == 0 {
			failed[t] = kerr.LeaderNotAvailable.Code // not there yet: clients retry
		}
	}
	return Reply{Body: o.d.metadataAnswer(o.ep, o.req, failed, o.g)}, nil
}

// createResult records topics the broker refused to create (an existing
// topic is fine: routing will show it).
func (o *metadataOp) createResult(ctx context.Context, failed map[string]int16) error {
	body, err := o.pending.Wait(ctx)
	if err != nil {
		return fmt.Errorf("wait for CreateTopics: %w", err)
	}
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.Version = min(o.d.vers.current().get(int16(kmsg.CreateTopics)).max, resp.MaxVersion())
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("decode CreateTopics answer: %w", err)
	}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 && t.ErrorCode != kerr.TopicAlreadyExists.Code {
			failed[t.Topic] = t.ErrorCode
		}
	}
	return nil
}

// awaitTopics waits until routing shows every created topic or ctx ends.
func (o *metadataOp) awaitTopics(ctx context.Context, failed map[string]int16) {
	for {
		changed := o.d.routes.Changed()
		all := true
		for _, t := range o.created {
			if _, ok := o.d.routes.Topic(t); !ok && failed[t] == 0 {
				all = false
			}
		}
		if all {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// metadataAnswer encodes the Metadata response; failed holds error codes
// for topics whose creation failed or is not visible yet.
// Topics g may not describe are left out of an all-topics answer.
func (d *Dispatcher) metadataAnswer(ep endpoint, req *kmsg.MetadataRequest, failed map[string]int16, g authrule.Guard) []byte {
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = req.Version
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: d.cfg.NodeID, Host: ep.host, Port: ep.port}}
	if d.cfg.ClusterID != "" {
		resp.ClusterID = kmsg.StringPtr(d.cfg.ClusterID)
	}
	resp.ControllerID = d.cfg.NodeID
	replicas := []int32{d.cfg.NodeID} // shared by every partition: encoding only reads it
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range d.routes.Topics() {
			if g.Describable(t.Name) {
				resp.Topics = append(resp.Topics, d.topicMetadata(t, replicas))
			}
		}
	} else {
		for _, rt := range req.Topics {
			resp.Topics = append(resp.Topics, d.requestedTopic(req.Version, rt, failed, replicas, g))
		}
	}
	g.FillOperations(req, resp)
	return resp.AppendTo(nil)
}

// requestedTopic answers one topic asked for by name or by id. A topic
// asked for by id is authorized by the name it resolves to: without
// Describe it answers TOPIC_AUTHORIZATION_FAILED with its id and no name
// (Kafka's KafkaApis: ids are not secret, names are); an unknown id
// answers UNKNOWN_TOPIC_ID.
func (d *Dispatcher) requestedTopic(version int16, rt kmsg.MetadataRequestTopic, failed map[string]int16, replicas []int32, g authrule.Guard) kmsg.MetadataResponseTopic {
	out := kmsg.NewMetadataResponseTopic()
	out.Topic, out.TopicID = rt.Topic, rt.TopicID
	var name string
	switch {
	case rt.Topic != nil:
		name = *rt.Topic
	case version >= 10:
		n, ok := d.ids.name(d.routes, rt.TopicID)
		if !ok {
			out.ErrorCode = kerr.UnknownTopicID.Code
			return out
		}
		if !g.Describable(n) {
			out.ErrorCode = kerr.TopicAuthorizationFailed.Code
			return out
		}
		name = n
	}
	if code := failed[name]; code != 0 {
		out.ErrorCode = code
		return out
	}
	t, ok := d.routes.Topic(name)
	if !ok {
		out.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if !validTopic(name) {
			out.ErrorCode = kerr.InvalidTopicException.Code
		}
		return out
	}
	return d.topicMetadata(t, replicas)
}

func (d *Dispatcher) topicMetadata(t routing.Topic, replicas []int32) kmsg.MetadataResponseTopic {
	out := kmsg.NewMetadataResponseTopic()
	out.Topic = kmsg.StringPtr(t.Name)
	out.TopicID = t.ID
	out.Partitions = make([]kmsg.MetadataResponseTopicPartition, t.Partitions)
	for p := range t.Partitions {
		mp := &out.Partitions[p]
		mp.Default()
		mp.Partition = p
		mp.Leader = d.cfg.NodeID
		// The last known epoch, owned or not (-1 only for a partition never
		// owned). Never -1 once a client has seen an epoch: kgo reads -1
		// as "no leader yet", keeps its old leader and holds the
		// partition's records until the epoch comes back, and nothing
		// comes back, because only a produce makes a broker acquire the
		// partition (issue 11: a producer hung 13 minutes). With the last
		// epoch the client produces again; a fetch at that epoch after a
		// new owner took over is answered FENCED_LEADER_EPOCH and costs
		// one metadata refresh.
		mp.LeaderEpoch = d.routes.Epoch(t.Name, p)
		mp.Replicas, mp.ISR = replicas, replicas
	}
	return out
}

func (d *Dispatcher) beginFindCoordinator(ctx context.Context, _ uint64, h Header, r kmsg.Request, _ []byte) (op, Reply, error) {
	ep := d.endpoint(ctx)
	req := r.(*kmsg.FindCoordinatorRequest)
	code := int16(0)
	var msg *string
	if len(d.routes.Brokers()) == 0 {
		code, msg = kerr.CoordinatorNotAvailable.Code, kmsg.StringPtr("no live broker")
	}
	resp := kmsg.NewPtrFindCoordinatorResponse()
	resp.Version = h.Version
	if h.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		resp.NodeID, resp.Host, resp.Port = d.cfg.NodeID, ep.host, ep.port
		return nil, Reply{Body: resp.AppendTo(nil)}, nil
	}
	for _, key := range req.CoordinatorKeys {
		resp.Coordinators = append(resp.Coordinators, kmsg.FindCoordinatorResponseCoordinator{
			Key: key, NodeID: d.cfg.NodeID, Host: ep.host, Port: ep.port,
			ErrorCode: code, ErrorMessage: msg,
		})
	}
	return nil, Reply{Body: resp.AppendTo(nil)}, nil
}

func (d *Dispatcher) beginDescribeCluster(ctx context.Context, _ uint64, h Header, r kmsg.Request, _ []byte) (op, Reply, error) {
	req := r.(*kmsg.DescribeClusterRequest)
	resp := kmsg.NewPtrDescribeClusterResponse()
	resp.Version = h.Version
	if req.EndpointType > 1 { // only broker endpoints exist behind the proxy
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
	}
	resp.EndpointType = 1
	resp.ClusterID = d.cfg.ClusterID
	resp.ControllerID = d.cfg.NodeID
	ep := d.endpoint(ctx)
	resp.Brokers = []kmsg.DescribeClusterResponseBroker{{NodeID: d.cfg.NodeID, Host: ep.host, Port: ep.port}}
	return nil, Reply{Body: resp.AppendTo(nil)}, nil
}
