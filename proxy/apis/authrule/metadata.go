package authrule

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/security/authz"
)

// Metadata as Kafka authorizes it: a topic asked for by name that the
// principal may not Describe answers TOPIC_AUTHORIZATION_FAILED (whether
// it exists or not, so existence is not told); an unknown topic that
// would be auto-created needs Create on the cluster or on the topic, or
// answers TOPIC_AUTHORIZATION_FAILED too; an all-topics request leaves out
// what may not be described.

// metadataDenied returns the code for each named topic g refuses.
func (g Guard) MetadataDenied(req *kmsg.MetadataRequest, toCreate []string) map[string]int16 {
	if !g.On() {
		return nil
	}
	var denied map[string]int16
	deny := func(t string) {
		if denied == nil {
			denied = map[string]int16{}
		}
		denied[t] = kerr.TopicAuthorizationFailed.Code
	}
	for _, t := range req.Topics {
		if t.Topic != nil && !g.Describable(*t.Topic) {
			deny(*t.Topic)
		}
	}
	if len(toCreate) > 0 && !g.Allowed(kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, authz.ClusterName) {
		for _, t := range toCreate {
			if denied[t] == 0 && !g.Allowed(kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, t) {
				deny(t)
			}
		}
	}
	return denied
}

func (g Guard) Describable(topic string) bool {
	return g.Allowed(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic)
}

// fillOperations sets the authorized-operations fields the request asks
// for (KIP-430).
func (g Guard) FillOperations(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	if req.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			t := &resp.Topics[i]
			if t.ErrorCode == 0 && t.Topic != nil {
				t.AuthorizedOperations = g.Ops(kmsg.ACLResourceTypeTopic, *t.Topic, authz.TopicOperations)
			}
		}
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = g.Ops(kmsg.ACLResourceTypeCluster, authz.ClusterName, authz.ClusterOperations)
	}
}
