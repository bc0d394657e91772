package apis

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// numKeys covers every API key kmsg knows.
const numKeys = 128

// apiKind says how the proxy answers an API.
type apiKind uint8

const (
	kindNone      apiKind = iota
	kindLocal             // answered by the proxy itself: brokers' versions do not limit it
	kindPartition         // split by partition owner
	kindGroup             // sent to the group's coordinator (split if batched)
	kindFanOut            // sent to every live broker, merged
	kindAny               // sent to any broker
)

// beginFunc decodes a request, routes it and sends its first attempts; it
// returns the op to finish, or the reply when it has it already.
type beginFunc func(d *Dispatcher, ctx context.Context, conn uint64, h Header, body []byte) (op, Reply, error)

// api is what the proxy serves of one API key: its handler, how it is
// answered and how it is refused. Versions: 0 through what kmsg decodes,
// limited to what every live broker can be served at (what it speaks, or
// what bridge.go bridges to it) unless the proxy answers it itself (see
// versions.go); ApiVersions is derived from this table.
type api struct {
	kind    apiKind
	begin   beginFunc
	refusal refusal
}

// refusal is Kafka's answer to a refused request of one API (refusals.go).
type refusal struct {
	// denied is the code of a request the principal may not make, as
	// Kafka's broker answers it (KafkaApis; the operations-and-resources
	// table of Kafka's documentation): per entry where Kafka decides per
	// entry, else for the whole request. 0 only with never or filtered.
	denied int16
	// never: Kafka authorizes nothing of this API (ApiVersions, SASL).
	// filtered: a denial leaves entries out of the answer instead of
	// refusing them (ListGroups without Describe on the cluster).
	never, filtered bool
	// unsupported is the code of a version the proxy or its pool does not
	// serve: UNSUPPORTED_VERSION for every API, as Kafka answers.
	unsupported int16
	// answer builds a refused response whose entries errorResponse cannot
	// see (the response lists them under other names); nil: errorResponse.
	answer func(req kmsg.Request, code int16) kmsg.Response
}

// apiTable is the one list of APIs this package serves. Anything else
// (inter-broker and KRaft APIs, share groups, ...) is never advertised and
// answered with UNSUPPORTED_VERSION (the row of an unserved key carries
// only that refusal).
var apiTable = func() (t [numKeys]api) {
	set := func(kind apiKind, begin beginFunc, r refusal, keys ...kmsg.Key) {
		for _, k := range keys {
			t[k] = api{kind: kind, begin: begin, refusal: r}
		}
	}
	topic := refusal{denied: kerr.TopicAuthorizationFailed.Code}
	group := refusal{denied: kerr.GroupAuthorizationFailed.Code}
	cluster := refusal{denied: kerr.ClusterAuthorizationFailed.Code}
	txn := refusal{denied: kerr.TransactionalIDAuthorizationFailed.Code}
	never := refusal{never: true}

	set(kindPartition, (*Dispatcher).beginProduce, topic, kmsg.Produce)
	set(kindPartition, (*Dispatcher).beginFetch, topic, kmsg.Fetch)
	set(kindPartition, (*Dispatcher).beginOffsets, topic, kmsg.ListOffsets, kmsg.OffsetForLeaderEpoch, kmsg.DeleteRecords)
	set(kindLocal, (*Dispatcher).beginMetadata, topic, kmsg.Metadata)
	set(kindLocal, (*Dispatcher).beginApiVersions, never, kmsg.ApiVersions)
	set(kindLocal, (*Dispatcher).beginFindCoordinator, refusal{denied: kerr.GroupAuthorizationFailed.Code, answer: renamed("Coordinators", "CoordinatorKeys")},
		kmsg.FindCoordinator)
	set(kindLocal, (*Dispatcher).beginDescribeCluster, cluster, kmsg.DescribeCluster)
	set(kindLocal, (*Dispatcher).beginACLs, cluster, kmsg.DescribeACLs)
	set(kindLocal, (*Dispatcher).beginACLs, refusal{denied: kerr.ClusterAuthorizationFailed.Code, answer: renamed("Results", "Creations")}, kmsg.CreateACLs)
	set(kindLocal, (*Dispatcher).beginACLs, refusal{denied: kerr.ClusterAuthorizationFailed.Code, answer: renamed("Results", "Filters")}, kmsg.DeleteACLs)
	set(kindGroup, (*Dispatcher).beginGroup, group,
		kmsg.OffsetCommit, kmsg.OffsetFetch, kmsg.JoinGroup, kmsg.Heartbeat, kmsg.LeaveGroup,
		kmsg.SyncGroup, kmsg.DescribeGroups, kmsg.DeleteGroups, kmsg.OffsetDelete,
		kmsg.ConsumerGroupHeartbeat, kmsg.ConsumerGroupDescribe)
	// The transactional id is checked before the group (Kafka's order).
	set(kindGroup, (*Dispatcher).beginGroup, txn, kmsg.TxnOffsetCommit)
	set(kindFanOut, (*Dispatcher).beginListGroups, refusal{filtered: true}, kmsg.ListGroups)
	// SASL exchanges run in the client connection (package proxy); these
	// answer SASL outside one, and the SCRAM credential APIs (KIP-554).
	set(kindLocal, (*Dispatcher).beginSASL, never, kmsg.SASLHandshake, kmsg.SASLAuthenticate)
	set(kindLocal, (*Dispatcher).beginDescribeSCRAM, cluster, kmsg.DescribeUserSCRAMCredentials)
	set(kindLocal, (*Dispatcher).beginAlterSCRAM, refusal{denied: kerr.ClusterAuthorizationFailed.Code, answer: alterSCRAMRefusal},
		kmsg.AlterUserSCRAMCredentials)
	set(kindAny, (*Dispatcher).beginAdmin, refusal{denied: kerr.TopicAuthorizationFailed.Code, answer: renamed("Topics", "TopicNames")},
		kmsg.DeleteTopics) // TopicNames before v6
	set(kindAny, (*Dispatcher).beginAdmin, topic,
		kmsg.CreateTopics, kmsg.CreatePartitions,
		// Configs: a topic's by the topic (29), a broker's by the cluster (31).
		kmsg.DescribeConfigs, kmsg.AlterConfigs, kmsg.IncrementalAlterConfigs)
	set(kindAny, (*Dispatcher).beginAdmin, txn, kmsg.InitProducerID, kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn)
	set(kindAny, (*Dispatcher).beginAdmin, refusal{denied: kerr.ClusterAuthorizationFailed.Code, answer: describeLogDirsRefusal},
		kmsg.DescribeLogDirs)
	set(kindLocal, (*Dispatcher).beginDescribeClientQuotas, cluster, kmsg.DescribeClientQuotas)
	set(kindLocal, (*Dispatcher).beginAlterClientQuotas, cluster, kmsg.AlterClientQuotas)
	// Not served, but answered UNSUPPORTED_VERSION per entry.
	t[kmsg.DescribeTransactions].refusal.answer = renamed("TransactionStates", "TransactionalIDs")
	t[kmsg.ShareGroupDescribe].refusal.answer = renamed("Groups", "GroupIDs")
	t[kmsg.AlterReplicaLogDirs].refusal.answer = alterReplicaLogDirsRefusal
	for k := range t {
		t[k].refusal.unsupported = kerr.UnsupportedVersion.Code
	}
	return t
}()

// staticTable is what kmsg decodes of every API in apiTable, before any
// broker is asked.
func staticTable() *vtable {
	t := &vtable{complete: true}
	for k := range numKeys {
		req := kmsg.RequestForKey(int16(k))
		if apiTable[k].begin == nil || req == nil {
			t.r[k] = noVersions
			continue
		}
		t.r[k] = vrange{min: 0, max: req.MaxVersion()}
	}
	return t
}
