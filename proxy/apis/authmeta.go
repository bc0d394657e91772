package apis

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
func (g guard) metadataDenied(req *kmsg.MetadataRequest, toCreate []string) map[string]int16 {
	if !g.on() {
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
		if t.Topic != nil && !g.describable(*t.Topic) {
			deny(*t.Topic)
		}
	}
	if len(toCreate) > 0 && !g.allowed(kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, authz.ClusterName) {
		for _, t := range toCreate {
			if denied[t] == 0 && !g.allowed(kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, t) {
				deny(t)
			}
		}
	}
	return denied
}

func (g guard) describable(topic string) bool {
	return g.allowed(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, topic)
}

// fillOperations sets the authorized-operations fields the request asks
// for (KIP-430).
func (g guard) fillOperations(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	if req.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			t := &resp.Topics[i]
			if t.ErrorCode == 0 && t.Topic != nil {
				t.AuthorizedOperations = g.ops(kmsg.ACLResourceTypeTopic, *t.Topic, authz.TopicOperations)
			}
		}
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = g.ops(kmsg.ACLResourceTypeCluster, authz.ClusterName, authz.ClusterOperations)
	}
}
