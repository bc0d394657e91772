package authrule

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/security/authz"
)

// The rules of the APIs authorized before they are begun, as Kafka's
// broker checks them (Kafka's KafkaApis; kafka.apache.org/documentation's
// operations-and-resources table). Each is named by the row of its API in
// table.go.

// oneGroup: op on the request's one group.
func oneGroup[R any](op kmsg.ACLOperation, group func(*R) string) Rule {
	return func(g Guard, req kmsg.Request, v *Verdict) {
		v.Refuse = g.GroupCode(op, group(any(req).(*R)))
	}
}

// groupsRule: op on each listed group, denied ones answered per group.
func groupsRule[R any](op kmsg.ACLOperation, list func(*R) *[]string) Rule {
	return func(g Guard, req kmsg.Request, v *Verdict) {
		strip(req, list(any(req).(*R)), "Groups", func(s *string) int16 { return g.GroupCode(op, *s) }, v)
	}
}

// clusterRule: op on the cluster.
func clusterRule(op kmsg.ACLOperation) Rule {
	return func(g Guard, _ kmsg.Request, v *Verdict) { v.Refuse = g.ClusterCode(op) }
}

var (
	JoinGroup              = oneGroup(kmsg.ACLOperationRead, func(r *kmsg.JoinGroupRequest) string { return r.Group })
	SyncGroup              = oneGroup(kmsg.ACLOperationRead, func(r *kmsg.SyncGroupRequest) string { return r.Group })
	Heartbeat              = oneGroup(kmsg.ACLOperationRead, func(r *kmsg.HeartbeatRequest) string { return r.Group })
	LeaveGroup             = oneGroup(kmsg.ACLOperationRead, func(r *kmsg.LeaveGroupRequest) string { return r.Group })
	ConsumerGroupHeartbeat = oneGroup(kmsg.ACLOperationRead,
		func(r *kmsg.ConsumerGroupHeartbeatRequest) string { return r.Group })
	DeleteGroups          = groupsRule(kmsg.ACLOperationDelete, func(r *kmsg.DeleteGroupsRequest) *[]string { return &r.Groups })
	ConsumerGroupDescribe = groupsRule(kmsg.ACLOperationDescribe,
		func(r *kmsg.ConsumerGroupDescribeRequest) *[]string { return &r.Groups })
	describeGroupList = groupsRule(kmsg.ACLOperationDescribe, func(r *kmsg.DescribeGroupsRequest) *[]string { return &r.Groups })

	DescribeLogDirs      = clusterRule(kmsg.ACLOperationDescribe)
	DescribeClientQuotas = clusterRule(kmsg.ACLOperationDescribeConfigs)
	AlterClientQuotas    = clusterRule(kmsg.ACLOperationAlterConfigs)
	// The SCRAM credential APIs also keep their own super-user check.
	DescribeSCRAM = clusterRule(kmsg.ACLOperationDescribe)
	AlterSCRAM    = clusterRule(kmsg.ACLOperationAlter)
)

func OffsetCommit(g Guard, req kmsg.Request, v *Verdict) {
	r := req.(*kmsg.OffsetCommitRequest)
	if v.Refuse = g.GroupCode(kmsg.ACLOperationRead, r.Group); v.Refuse == 0 {
		strip(req, &r.Topics, "Topics", func(t *kmsg.OffsetCommitRequestTopic) int16 { return g.TopicCode(kmsg.ACLOperationRead, t.Topic) }, v)
	}
}

// TxnOffsetCommit: the transactional id is checked before the group
// (Kafka's order).
func TxnOffsetCommit(g Guard, req kmsg.Request, v *Verdict) {
	r := req.(*kmsg.TxnOffsetCommitRequest)
	if v.Refuse = first(func() int16 { return g.TxnCode(r.TransactionalID) }, func() int16 { return g.GroupCode(kmsg.ACLOperationRead, r.Group) }); v.Refuse == 0 {
		strip(req, &r.Topics, "Topics", func(t *kmsg.TxnOffsetCommitRequestTopic) int16 { return g.TopicCode(kmsg.ACLOperationRead, t.Topic) }, v)
	}
}

func OffsetDelete(g Guard, req kmsg.Request, v *Verdict) {
	r := req.(*kmsg.OffsetDeleteRequest)
	if v.Refuse = g.GroupCode(kmsg.ACLOperationDelete, r.Group); v.Refuse == 0 {
		strip(req, &r.Topics, "Topics", func(t *kmsg.OffsetDeleteRequestTopic) int16 { return g.TopicCode(kmsg.ACLOperationRead, t.Topic) }, v)
	}
}

func DescribeGroups(g Guard, req kmsg.Request, v *Verdict) {
	describeGroupList(g, req, v)
	if req.(*kmsg.DescribeGroupsRequest).IncludeAuthorizedOperations {
		v.add(func(resp kmsg.Response) {
			for i := range resp.(*kmsg.DescribeGroupsResponse).Groups {
				x := &resp.(*kmsg.DescribeGroupsResponse).Groups[i]
				if x.ErrorCode == 0 {
					x.AuthorizedOperations = g.Ops(kmsg.ACLResourceTypeGroup, x.Group, authz.GroupOperations)
				}
			}
		})
	}
}

func DescribeCluster(g Guard, req kmsg.Request, v *Verdict) {
	if v.Refuse = g.ClusterCode(kmsg.ACLOperationDescribe); v.Refuse == 0 && req.(*kmsg.DescribeClusterRequest).IncludeClusterAuthorizedOperations {
		v.add(func(resp kmsg.Response) {
			resp.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations = g.Ops(kmsg.ACLResourceTypeCluster, authz.ClusterName, authz.ClusterOperations)
		})
	}
}

func InitProducerID(g Guard, req kmsg.Request, v *Verdict) {
	r := req.(*kmsg.InitProducerIDRequest)
	if r.TransactionalID != nil {
		v.Refuse = g.TxnCode(*r.TransactionalID)
		return
	}
	// Idempotent producers: IdempotentWrite on the cluster, or Write on
	// any topic (KIP-679).
	if !g.Cluster(kmsg.ACLOperationIdempotentWrite) && !g.AnyTopicWrite() {
		v.Refuse = kerr.ClusterAuthorizationFailed.Code
	}
}

func AddPartitionsToTxn(g Guard, req kmsg.Request, v *Verdict) {
	r := req.(*kmsg.AddPartitionsToTxnRequest)
	if r.Version >= 4 { // broker to broker
		v.Refuse = g.ClusterCode(kmsg.ACLOperationClusterAction)
		return
	}
	if v.Refuse = g.TxnCode(r.TransactionalID); v.Refuse != 0 {
		return
	}
	// Kafka: any unauthorized topic fails the request; the authorized
	// partitions answer OPERATION_NOT_ATTEMPTED.
	denied := false
	for _, tp := range r.Topics {
		denied = denied || g.TopicCode(kmsg.ACLOperationWrite, tp.Topic) != 0
	}
	if denied {
		strip(req, &r.Topics, "Topics", func(tp *kmsg.AddPartitionsToTxnRequestTopic) int16 {
			if c := g.TopicCode(kmsg.ACLOperationWrite, tp.Topic); c != 0 {
				return c
			}
			return kerr.OperationNotAttempted.Code
		}, v)
	}
}

func AddOffsetsToTxn(g Guard, req kmsg.Request, v *Verdict) {
	r := req.(*kmsg.AddOffsetsToTxnRequest)
	v.Refuse = first(func() int16 { return g.TxnCode(r.TransactionalID) }, func() int16 { return g.GroupCode(kmsg.ACLOperationRead, r.Group) })
}

func EndTxn(g Guard, req kmsg.Request, v *Verdict) {
	v.Refuse = g.TxnCode(req.(*kmsg.EndTxnRequest).TransactionalID)
}

func OffsetFetch(g Guard, req kmsg.Request, v *Verdict) {
	r := req.(*kmsg.OffsetFetchRequest)
	if r.Version >= 8 {
		strip(req, &r.Groups, "Groups", func(q *kmsg.OffsetFetchRequestGroup) int16 {
			return g.GroupCode(kmsg.ACLOperationDescribe, q.Group)
		}, v)
		for i := range r.Groups {
			groupTopics(g, &r.Groups[i], v)
		}
		return
	}
	if v.Refuse = g.GroupCode(kmsg.ACLOperationDescribe, r.Group); v.Refuse != 0 {
		return
	}
	if r.Topics != nil {
		strip(req, &r.Topics, "Topics", func(t *kmsg.OffsetFetchRequestTopic) int16 {
			return g.TopicCode(kmsg.ACLOperationDescribe, t.Topic)
		}, v)
		return
	}
	// Every topic of the group: leave out what may not be described.
	v.add(func(resp kmsg.Response) {
		o := resp.(*kmsg.OffsetFetchResponse)
		o.Topics = slices.DeleteFunc(o.Topics, func(t kmsg.OffsetFetchResponseTopic) bool { return !g.Describable(t.Topic) })
	})
}

// groupTopics authorizes the topics of one group of an OffsetFetch v8+:
// Describe on each; a denied topic asked for answers 29 for its
// partitions, and an all-topics answer leaves denied topics out.
func groupTopics(g Guard, q *kmsg.OffsetFetchRequestGroup, v *Verdict) {
	group := q.Group
	name := func(topic string, id [16]byte) (string, bool) {
		if topic != "" {
			return topic, true
		}
		return g.topicName(id) // an unknown id is the broker's to answer
	}
	if q.Topics == nil {
		v.add(func(resp kmsg.Response) {
			for i := range resp.(*kmsg.OffsetFetchResponse).Groups {
				rg := &resp.(*kmsg.OffsetFetchResponse).Groups[i]
				if rg.Group == group {
					rg.Topics = slices.DeleteFunc(rg.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool {
						n, ok := name(t.Topic, t.TopicID)
						return ok && !g.Describable(n)
					})
				}
			}
		})
		return
	}
	var denied []kmsg.OffsetFetchRequestGroupTopic
	q.Topics = slices.DeleteFunc(q.Topics, func(t kmsg.OffsetFetchRequestGroupTopic) bool {
		n, ok := name(t.Topic, t.TopicID)
		if ok && !g.Describable(n) {
			denied = append(denied, t)
			return true
		}
		return false
	})
	if len(denied) == 0 {
		return
	}
	v.Stripped = true
	v.add(func(resp kmsg.Response) {
		for i := range resp.(*kmsg.OffsetFetchResponse).Groups {
			rg := &resp.(*kmsg.OffsetFetchResponse).Groups[i]
			if rg.Group != group {
				continue
			}
			for _, t := range denied {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.ErrorCode = p, kerr.TopicAuthorizationFailed.Code
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
		}
	})
}

// ListGroups: Describe on the cluster lists every group; otherwise
// only the groups the principal may describe.
func ListGroups(g Guard, _ kmsg.Request, v *Verdict) {
	if g.Cluster(kmsg.ACLOperationDescribe) {
		return
	}
	v.add(func(resp kmsg.Response) {
		l := resp.(*kmsg.ListGroupsResponse)
		l.Groups = slices.DeleteFunc(l.Groups, func(x kmsg.ListGroupsResponseGroup) bool {
			return g.GroupCode(kmsg.ACLOperationDescribe, x.Group) != 0
		})
	})
}

// FindCoordinator: Describe on the group (30) or the transactional id
// (53) for each key.
func FindCoordinator(g Guard, req kmsg.Request, v *Verdict) {
	r := req.(*kmsg.FindCoordinatorRequest)
	code := func(key string) int16 {
		if r.CoordinatorType == 1 {
			if g.Allowed(kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, key) {
				return 0
			}
			return kerr.TransactionalIDAuthorizationFailed.Code
		}
		return g.GroupCode(kmsg.ACLOperationDescribe, key)
	}
	if r.Version < 4 {
		v.Refuse = code(r.CoordinatorKey)
		return
	}
	v.add(func(resp kmsg.Response) {
		for i := range resp.(*kmsg.FindCoordinatorResponse).Coordinators {
			c := &resp.(*kmsg.FindCoordinatorResponse).Coordinators[i]
			if cd := code(c.Key); cd != 0 {
				c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage = -1, "", -1, cd, nil
			}
		}
	})
}

func CreateTopics(g Guard, req kmsg.Request, v *Verdict) {
	if g.Cluster(kmsg.ACLOperationCreate) {
		return
	}
	r := req.(*kmsg.CreateTopicsRequest)
	strip(req, &r.Topics, "Topics", func(x *kmsg.CreateTopicsRequestTopic) int16 { return g.TopicCode(kmsg.ACLOperationCreate, x.Topic) }, v)
}

func CreatePartitions(g Guard, req kmsg.Request, v *Verdict) {
	r := req.(*kmsg.CreatePartitionsRequest)
	strip(req, &r.Topics, "Topics", func(x *kmsg.CreatePartitionsRequestTopic) int16 { return g.TopicCode(kmsg.ACLOperationAlter, x.Topic) }, v)
}

func DescribeConfigs(g Guard, req kmsg.Request, v *Verdict) {
	r := req.(*kmsg.DescribeConfigsRequest)
	strip(req, &r.Resources, "Resources", func(x *kmsg.DescribeConfigsRequestResource) int16 {
		return g.ConfigCode(kmsg.ACLOperationDescribeConfigs, x.ResourceType, x.ResourceName)
	}, v)
}

func AlterConfigs(g Guard, req kmsg.Request, v *Verdict) {
	r := req.(*kmsg.AlterConfigsRequest)
	strip(req, &r.Resources, "Resources", func(x *kmsg.AlterConfigsRequestResource) int16 {
		return g.ConfigCode(kmsg.ACLOperationAlterConfigs, x.ResourceType, x.ResourceName)
	}, v)
}

func IncrementalAlterConfigs(g Guard, req kmsg.Request, v *Verdict) {
	r := req.(*kmsg.IncrementalAlterConfigsRequest)
	strip(req, &r.Resources, "Resources", func(x *kmsg.IncrementalAlterConfigsRequestResource) int16 {
		return g.ConfigCode(kmsg.ACLOperationAlterConfigs, x.ResourceType, x.ResourceName)
	}, v)
}

// configCode: topic configs by topic (29), broker configs by the cluster
// (31).
func (g Guard) ConfigCode(op kmsg.ACLOperation, rt kmsg.ConfigResourceType, name string) int16 {
	if rt == kmsg.ConfigResourceTypeTopic {
		return g.TopicCode(op, name)
	}
	return g.ClusterCode(op)
}

// DeleteTopics: Delete on each topic (by name, or by the name its id
// resolves to; an unknown id is the broker's to answer).
func DeleteTopics(g Guard, req kmsg.Request, v *Verdict) {
	r := req.(*kmsg.DeleteTopicsRequest)
	if r.Version < 6 {
		var denied []string
		r.TopicNames = slices.DeleteFunc(r.TopicNames, func(s string) bool {
			if g.TopicCode(kmsg.ACLOperationDelete, s) != 0 {
				denied = append(denied, s)
				return true
			}
			return false
		})
		if len(denied) == 0 {
			return
		}
		v.Stripped, v.Empty = true, len(r.TopicNames) == 0
		v.add(func(resp kmsg.Response) {
			o := resp.(*kmsg.DeleteTopicsResponse)
			for _, s := range denied {
				x := kmsg.NewDeleteTopicsResponseTopic()
				x.Topic, x.ErrorCode = kmsg.StringPtr(s), kerr.TopicAuthorizationFailed.Code
				o.Topics = append(o.Topics, x)
			}
		})
		return
	}
	strip(req, &r.Topics, "Topics", func(x *kmsg.DeleteTopicsRequestTopic) int16 {
		name := ""
		if x.Topic != nil {
			name = *x.Topic
		} else if n, ok := g.topicName(x.TopicID); ok {
			name = n
		} else {
			return 0
		}
		return g.TopicCode(kmsg.ACLOperationDelete, name)
	}, v)
}
