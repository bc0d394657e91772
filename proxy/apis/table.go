package apis

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis/answer"
	"github.com/kproxy/kproxy/proxy/apis/authrule"
	"github.com/kproxy/kproxy/proxy/upstream"
	"github.com/kproxy/kproxy/retry"
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
// returns the op to finish, or the reply when it has it already. It is the
// handler of the APIs that decode only what routing needs, in place (the
// partition-split APIs: the hot path) or answer without a rule.
type beginFunc func(d *Dispatcher, ctx context.Context, conn uint64, h Header, body []byte) (op, Reply, error)

// serveFunc is the handler of an API decoded once, before its auth rule
// runs: it gets the request the rule saw (and may have stripped) and body,
// its encoding (re-encoded when the rule stripped entries).
type serveFunc func(d *Dispatcher, ctx context.Context, conn uint64, h Header, req kmsg.Request, body []byte) (op, Reply, error)

// api is everything the proxy knows of one API key. Versions: 0 through
// what kmsg decodes, limited to what every live broker can be served at
// (what it speaks, or what bridge.go bridges to it) unless the proxy
// answers it itself (see versions.go); ApiVersions, the authorizer's
// metric labels (AuthorizedKeys), the per-API metric labels (metrics.go)
// and the split engine's repeatable set are derived from this table.
type api struct {
	kind apiKind
	// Exactly one handler: begin (raw body) or serve (decoded once).
	begin beginFunc
	serve serveFunc
	// auth is how a request is authorized: a rule run on the decoded
	// request before serve, per partition by the handler, or not at all.
	// The zero value is no choice, which TestEveryRowHasAuth refuses.
	auth auth
	// route is the routing key of a request sent to one broker: the group
	// (kindGroup), or the rendezvous key (kindAny: the transactional id,
	// the first topic or resource); nil: none.
	route func(kmsg.Request) string
	// hold is how long its broker may hold the request (holdOf, below); nil:
	// not held.
	hold func(kmsg.Request) upstream.Hold
	// repeatable: repeating an attempt that may have been processed has no
	// further effect (reads, Heartbeat), so a lost answer or a timeout is
	// retried (retry.Classify). Not OffsetCommit: a late repeat could
	// overwrite a newer commit the client made meanwhile.
	repeatable bool
	refusal    refusal
}

// authMode says how an API is authorized.
type authMode uint8

const (
	authUnset        authMode = iota // no choice made: refused by TestEveryRowHasAuth
	authRule                         // auth.rule decides the decoded request (authorized.go)
	authPerPartition                 // the handler decides per partition, topic or entry as it splits or answers (topicCheck, metadataDenied, aclOp)
	authNone                         // Kafka authorizes nothing of this API (ApiVersions, SASL)
)

type auth struct {
	mode authMode
	rule authrule.Rule
	// op is the operation a partition-split request needs on each topic
	// (topicCheck reads it); set by perTopic, required of kindPartition rows.
	op kmsg.ACLOperation
}

func byRule(r authrule.Rule) auth { return auth{mode: authRule, rule: r} }

// perTopic: the handler checks op on each topic as it splits (topicCheck).
func perTopic(op kmsg.ACLOperation) auth { return auth{mode: authPerPartition, op: op} }

var (
	perPartition = auth{mode: authPerPartition} // the handler decides per entry (metadataDenied, aclOp)
	noAuth       = auth{mode: authNone}
)

// refusal is Kafka's answer to a refused request of one API (refuse, in
// this file; the builders are package answer's).
type refusal struct {
	// denied is the code of a request the principal may not make, as
	// Kafka's broker answers it (KafkaApis; the operations-and-resources
	// table of Kafka's documentation): per entry where Kafka decides per
	// entry, else for the whole request. 0 only with never or filtered.
	denied int16
	// never: Kafka authorizes nothing of this API (ApiVersions, SASL); set
	// from the row's auth (noAuth).
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

// apiTable is the one list of APIs this package serves, built from rows
// (init: handlers read it, so it cannot be a variable's initializer).
// Anything else (inter-broker and KRaft APIs, share groups, ...) is never
// advertised and answered with UNSUPPORTED_VERSION (the row of an unserved
// key carries only that refusal).
//
// Adding an API takes these parts, and no others (docs/architecture.md,
// "Adding an API", works one through):
//  1. its row in rows(), below: the kind; the handler (begin, or serve to
//     get the request decoded once and authorized by a rule); auth (byRule
//     with a rule of package authrule; perTopic(op) for a partition-split
//     API, whose handler checks op on each topic with topicCheck;
//     perPartition when the handler decides each entry itself; or noAuth);
//     route (its helpers sit beside the rows) and hold when the request goes
//     to one broker or may be held; repeatable when a repeat has no effect;
//     and the refusal (the denied code Kafka answers, an answer function when
//     the response names its entries differently);
//  2. its handler, when none fits: group and admin requests have theirs
//     (beginGroup, beginAdmin in forward.go); a partition list with the
//     offsets' shape is a partListSpec and a case in partitions.go; any
//     other is one new file of this package, an adapter of the split engine;
//  3. its rule in authrule/rules.go, when auth is byRule;
//  4. its line in docs/authorization.md's table of what each request needs
//     (TestAuthorizationDocMatchesTable fails until it is there);
//  5. for an API routed to brokers: the reference broker's answer
//     (refbroker/broker/apiversions.go's implemented), or its name in
//     testkit's refBrokerLacks (TestRefBrokerAPIsMatchTheProxy fails until
//     one is there).
//
// TestEveryRowHasAuth flags a row that lacks a part (rowProblems),
// TestRefusalTableCoversEveryAPI its refusal, the bridge tests its versions.
var apiTable [numKeys]api

func init() { apiTable = buildTable(rows()) }

func buildTable(rows map[kmsg.Key]api) (t [numKeys]api) {
	for k, row := range rows {
		row.refusal.never = row.auth.mode == authNone
		t[k] = row
	}
	// Not served, but answered UNSUPPORTED_VERSION per entry.
	t[kmsg.DescribeTransactions].refusal.answer = answer.Renamed("TransactionStates", "TransactionalIDs")
	t[kmsg.ShareGroupDescribe].refusal.answer = answer.Renamed("Groups", "GroupIDs")
	t[kmsg.AlterReplicaLogDirs].refusal.answer = answer.AlterReplicaLogDirsRefusal
	for k := range t {
		t[k].refusal.unsupported = kerr.UnsupportedVersion.Code
	}
	return t
}

// rows: one per served API.
func rows() map[kmsg.Key]api {
	topic := refusal{denied: kerr.TopicAuthorizationFailed.Code}
	group := refusal{denied: kerr.GroupAuthorizationFailed.Code}
	cluster := refusal{denied: kerr.ClusterAuthorizationFailed.Code}
	txn := refusal{denied: kerr.TransactionalIDAuthorizationFailed.Code}
	clusterAs := func(answer func(kmsg.Request, int16) kmsg.Response) refusal {
		return refusal{denied: kerr.ClusterAuthorizationFailed.Code, answer: answer}
	}
	g := (*Dispatcher).beginGroup
	admin := (*Dispatcher).beginAdmin
	return map[kmsg.Key]api{
		// Split by partition owner, authorized per partition.
		kmsg.Produce:              {kind: kindPartition, begin: (*Dispatcher).beginProduce, auth: perTopic(kmsg.ACLOperationWrite), hold: produceHold, refusal: topic},
		kmsg.Fetch:                {kind: kindPartition, begin: (*Dispatcher).beginFetch, auth: perTopic(kmsg.ACLOperationRead), hold: fetchRequestHold, repeatable: true, refusal: topic},
		kmsg.ListOffsets:          {kind: kindPartition, begin: (*Dispatcher).beginOffsets, auth: perTopic(kmsg.ACLOperationDescribe), repeatable: true, refusal: topic},
		kmsg.OffsetForLeaderEpoch: {kind: kindPartition, begin: (*Dispatcher).beginOffsets, auth: perTopic(kmsg.ACLOperationDescribe), repeatable: true, refusal: topic},
		kmsg.DeleteRecords:        {kind: kindPartition, begin: (*Dispatcher).beginOffsets, auth: perTopic(kmsg.ACLOperationDelete), hold: convergeHold, refusal: topic},

		// Answered by the proxy.
		kmsg.Metadata:    {kind: kindLocal, begin: (*Dispatcher).beginMetadata, auth: perPartition, repeatable: true, refusal: topic},
		kmsg.ApiVersions: {kind: kindLocal, begin: (*Dispatcher).beginApiVersions, auth: noAuth, repeatable: true},
		kmsg.FindCoordinator: {kind: kindLocal, serve: (*Dispatcher).beginFindCoordinator, auth: byRule(authrule.FindCoordinator), repeatable: true,
			refusal: refusal{denied: kerr.GroupAuthorizationFailed.Code, answer: answer.Renamed("Coordinators", "CoordinatorKeys")}},
		kmsg.DescribeCluster: {kind: kindLocal, serve: (*Dispatcher).beginDescribeCluster, auth: byRule(authrule.DescribeCluster), repeatable: true, refusal: cluster},
		// ACLs: Describe or Alter on the cluster, per filter or creation (aclOp).
		kmsg.DescribeACLs: {kind: kindLocal, begin: (*Dispatcher).beginACLs, auth: perPartition, refusal: cluster},
		kmsg.CreateACLs:   {kind: kindLocal, begin: (*Dispatcher).beginACLs, auth: perPartition, refusal: clusterAs(answer.Renamed("Results", "Creations"))},
		kmsg.DeleteACLs:   {kind: kindLocal, begin: (*Dispatcher).beginACLs, auth: perPartition, refusal: clusterAs(answer.Renamed("Results", "Filters"))},
		// SASL exchanges run in the client connection (package proxy); these
		// answer SASL outside one, and the SCRAM credential APIs (KIP-554).
		kmsg.SASLHandshake:                {kind: kindLocal, begin: (*Dispatcher).beginSASL, auth: noAuth},
		kmsg.SASLAuthenticate:             {kind: kindLocal, begin: (*Dispatcher).beginSASL, auth: noAuth},
		kmsg.DescribeUserSCRAMCredentials: {kind: kindLocal, serve: (*Dispatcher).beginDescribeSCRAM, auth: byRule(authrule.DescribeSCRAM), refusal: cluster},
		kmsg.AlterUserSCRAMCredentials:    {kind: kindLocal, serve: (*Dispatcher).beginAlterSCRAM, auth: byRule(authrule.AlterSCRAM), refusal: clusterAs(answer.AlterSCRAMRefusal)},
		kmsg.DescribeClientQuotas:         {kind: kindLocal, serve: (*Dispatcher).beginDescribeClientQuotas, auth: byRule(authrule.DescribeClientQuotas), refusal: cluster},
		kmsg.AlterClientQuotas:            {kind: kindLocal, serve: (*Dispatcher).beginAlterClientQuotas, auth: byRule(authrule.AlterClientQuotas), refusal: cluster},

		// Sent to the group's coordinator (split if batched: route nil).
		kmsg.OffsetCommit: {kind: kindGroup, serve: g, auth: byRule(authrule.OffsetCommit), refusal: group,
			route: func(r kmsg.Request) string { return r.(*kmsg.OffsetCommitRequest).Group }},
		kmsg.OffsetFetch: {kind: kindGroup, serve: g, auth: byRule(authrule.OffsetFetch), repeatable: true, refusal: group,
			route: func(r kmsg.Request) string { return r.(*kmsg.OffsetFetchRequest).Group }}, // before v8
		kmsg.JoinGroup: {kind: kindGroup, serve: g, auth: byRule(authrule.JoinGroup), hold: joinGroupHold, refusal: group,
			route: func(r kmsg.Request) string { return r.(*kmsg.JoinGroupRequest).Group }},
		kmsg.Heartbeat: {kind: kindGroup, serve: g, auth: byRule(authrule.Heartbeat), repeatable: true, refusal: group,
			route: func(r kmsg.Request) string { return r.(*kmsg.HeartbeatRequest).Group }},
		kmsg.LeaveGroup: {kind: kindGroup, serve: g, auth: byRule(authrule.LeaveGroup), refusal: group,
			route: func(r kmsg.Request) string { return r.(*kmsg.LeaveGroupRequest).Group }},
		kmsg.SyncGroup: {kind: kindGroup, serve: g, auth: byRule(authrule.SyncGroup), hold: syncGroupHold, refusal: group,
			route: func(r kmsg.Request) string { return r.(*kmsg.SyncGroupRequest).Group }},
		kmsg.DescribeGroups: {kind: kindGroup, serve: g, auth: byRule(authrule.DescribeGroups), repeatable: true, refusal: group},
		kmsg.DeleteGroups:   {kind: kindGroup, serve: g, auth: byRule(authrule.DeleteGroups), refusal: group},
		kmsg.OffsetDelete: {kind: kindGroup, serve: g, auth: byRule(authrule.OffsetDelete), refusal: group,
			route: func(r kmsg.Request) string { return r.(*kmsg.OffsetDeleteRequest).Group }},
		kmsg.ConsumerGroupHeartbeat: {kind: kindGroup, serve: g, auth: byRule(authrule.ConsumerGroupHeartbeat), refusal: group,
			route: func(r kmsg.Request) string { return r.(*kmsg.ConsumerGroupHeartbeatRequest).Group }},
		kmsg.ConsumerGroupDescribe: {kind: kindGroup, serve: g, auth: byRule(authrule.ConsumerGroupDescribe), repeatable: true, refusal: group},
		// The transactional id is checked before the group (Kafka's order).
		kmsg.TxnOffsetCommit: {kind: kindGroup, serve: g, auth: byRule(authrule.TxnOffsetCommit), refusal: txn,
			route: func(r kmsg.Request) string { return r.(*kmsg.TxnOffsetCommitRequest).Group }},

		// Sent to every live broker, merged.
		kmsg.ListGroups: {kind: kindFanOut, serve: (*Dispatcher).beginListGroups, auth: byRule(authrule.ListGroups), repeatable: true,
			refusal: refusal{filtered: true}},

		// Sent to any broker, by rendezvous on route (forward.go: beginAdmin).
		kmsg.DeleteTopics: {kind: kindAny, serve: admin, auth: byRule(authrule.DeleteTopics), hold: convergeHold,
			refusal: refusal{denied: kerr.TopicAuthorizationFailed.Code, answer: answer.Renamed("Topics", "TopicNames")}}, // TopicNames before v6
		kmsg.CreateTopics: {kind: kindAny, serve: admin, auth: byRule(authrule.CreateTopics), hold: convergeHold, refusal: topic,
			route: func(r kmsg.Request) string { return firstOf(r.(*kmsg.CreateTopicsRequest).Topics, createdTopic) }},
		kmsg.CreatePartitions: {kind: kindAny, serve: admin, auth: byRule(authrule.CreatePartitions), hold: convergeHold, refusal: topic,
			route: func(r kmsg.Request) string { return firstOf(r.(*kmsg.CreatePartitionsRequest).Topics, partitionsTopic) }},
		// Configs: a topic's by the topic (29), a broker's by the cluster (31).
		kmsg.DescribeConfigs: {kind: kindAny, serve: admin, auth: byRule(authrule.DescribeConfigs), repeatable: true, refusal: topic,
			route: func(r kmsg.Request) string { return firstOf(r.(*kmsg.DescribeConfigsRequest).Resources, describedName) }},
		kmsg.AlterConfigs: {kind: kindAny, serve: admin, auth: byRule(authrule.AlterConfigs), refusal: topic,
			route: func(r kmsg.Request) string { return firstOf(r.(*kmsg.AlterConfigsRequest).Resources, alteredName) }},
		kmsg.IncrementalAlterConfigs: {kind: kindAny, serve: admin, auth: byRule(authrule.IncrementalAlterConfigs), refusal: topic,
			route: func(r kmsg.Request) string {
				return firstOf(r.(*kmsg.IncrementalAlterConfigsRequest).Resources, incrementallyAlteredName)
			}},
		kmsg.InitProducerID: {kind: kindAny, serve: admin, auth: byRule(authrule.InitProducerID), refusal: txn,
			route: func(r kmsg.Request) string { return deref(r.(*kmsg.InitProducerIDRequest).TransactionalID) }},
		kmsg.AddPartitionsToTxn: {kind: kindAny, serve: admin, auth: byRule(authrule.AddPartitionsToTxn), refusal: txn, route: addPartitionsKey},
		kmsg.AddOffsetsToTxn: {kind: kindAny, serve: admin, auth: byRule(authrule.AddOffsetsToTxn), refusal: txn,
			route: func(r kmsg.Request) string { return r.(*kmsg.AddOffsetsToTxnRequest).TransactionalID }},
		kmsg.EndTxn: {kind: kindAny, serve: admin, auth: byRule(authrule.EndTxn), refusal: txn,
			route: func(r kmsg.Request) string { return r.(*kmsg.EndTxnRequest).TransactionalID }},
		kmsg.DescribeLogDirs: {kind: kindAny, serve: admin, auth: byRule(authrule.DescribeLogDirs), refusal: clusterAs(answer.DescribeLogDirsRefusal)},
	}
}

// The routing keys of admin and transaction requests (their rows' route).
func firstOf[T any](list []T, name func(*T) string) string {
	if len(list) == 0 {
		return ""
	}
	return name(&list[0])
}

func createdTopic(t *kmsg.CreateTopicsRequestTopic) string        { return t.Topic }
func partitionsTopic(t *kmsg.CreatePartitionsRequestTopic) string { return t.Topic }
func describedName(r *kmsg.DescribeConfigsRequestResource) string { return r.ResourceName }
func alteredName(r *kmsg.AlterConfigsRequestResource) string      { return r.ResourceName }
func incrementallyAlteredName(r *kmsg.IncrementalAlterConfigsRequestResource) string {
	return r.ResourceName
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// addPartitionsKey: the transactional id, of the first transaction from v4
// (which batches transactions, broker to broker).
func addPartitionsKey(req kmsg.Request) string {
	r := req.(*kmsg.AddPartitionsToTxnRequest)
	if r.Version < 4 {
		return r.TransactionalID
	}
	if len(r.Transactions) > 0 {
		return r.Transactions[0].TransactionalID
	}
	return ""
}

// staticTable is what kmsg decodes of every API in apiTable, before any
// broker is asked.
func staticTable() *vtable {
	t := &vtable{complete: true}
	for k := range numKeys {
		req := kmsg.RequestForKey(int16(k))
		if !apiTable[k].served() || req == nil {
			t.r[k] = noVersions
			continue
		}
		t.r[k] = vrange{min: 0, max: req.MaxVersion()}
	}
	return t
}

// served reports whether the row has a handler.
func (a *api) served() bool { return a.begin != nil || a.serve != nil }

// refuse builds req's response refusing everything it asks about with
// code, as the API's row says (table.go): through its own builder when the
// response names its entries differently from the request, else
// errorResponse.
func refuse(req kmsg.Request, code int16) kmsg.Response {
	if k := req.Key(); k >= 0 && int(k) < numKeys {
		if a := apiTable[k].refusal.answer; a != nil {
			return a(req, code)
		}
	}
	return answer.ErrorResponse(req, code)
}

// groupHoldAllowance is how long a broker may hold a SyncGroup (until the
// leader's assignment arrives): Kafka's default rebalance timeout
// (max.poll.interval.ms).
const groupHoldAllowance = 5 * time.Minute

// holdOf says, from a decoded request, how long its broker may hold it
// (upstream.Hold): its row's hold (table.go). This package owns the
// knowledge of which requests are long polls; the Sender only keeps them
// off shared connections.
//
// Held for long: Fetch with a positive MaxWait (a long poll), JoinGroup
// (until every member rejoined, up to its rebalance timeout), SyncGroup
// (until the leader's assignment), and the admin requests that wait for
// the cluster to converge (CreateTopics, DeleteTopics, DeleteRecords,
// CreatePartitions). Produce waits up to its timeout too, but is not
// Long: one client's produces must reach the broker on one connection, in
// order.
func holdOf(req kmsg.Request) upstream.Hold {
	if hold := apiTable[req.Key()].hold; hold != nil {
		return hold(req)
	}
	return upstream.Hold{}
}

// The holds of the rows that have one.
func produceHold(req kmsg.Request) upstream.Hold {
	r := req.(*kmsg.ProduceRequest)
	return upstream.Hold{Allowance: millis(r.TimeoutMillis), NoResponse: r.Acks == 0}
}

func fetchRequestHold(req kmsg.Request) upstream.Hold {
	return fetchHold(req.(*kmsg.FetchRequest).MaxWaitMillis)
}

func joinGroupHold(req kmsg.Request) upstream.Hold {
	r := req.(*kmsg.JoinGroupRequest)
	t := r.RebalanceTimeoutMillis
	if r.Version == 0 { // v0's session timeout served as both
		t = r.SessionTimeoutMillis
	}
	return upstream.Hold{Long: true, Allowance: millis(t)}
}

func syncGroupHold(kmsg.Request) upstream.Hold {
	return upstream.Hold{Long: true, Allowance: groupHoldAllowance}
}

// convergeHold: admin requests that wait for the cluster to converge.
func convergeHold(kmsg.Request) upstream.Hold { return upstream.Hold{Long: true} }

// fetchHold is the Hold of a fetch asking a broker to wait maxWait ms.
func fetchHold(maxWait int32) upstream.Hold {
	return upstream.Hold{Long: maxWait > 0, Allowance: millis(maxWait)}
}

func millis(ms int32) time.Duration { return time.Duration(max(ms, 0)) * time.Millisecond }

// send forwards a request the proxy decoded (req) whose encoding is body.
func (d *Dispatcher) send(ctx context.Context, broker int32, conn uint64, h Header, req kmsg.Request, body Body) (Pending, error) {
	return d.sender.Send(ctx, broker, conn, upstream.Request{
		Key: h.Key, Version: h.Version, ClientID: h.ClientID, Body: body, Hold: holdOf(req),
	})
}

func isNotSent(err error) bool { return errors.Is(err, retry.ErrNotSent) }
