package apis

import (
	"context"

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

// api is what the proxy serves of one API key: its handler and how it is
// answered. Versions: 0 through what kmsg decodes, intersected with what
// every live broker serves unless the proxy answers it itself (see
// versions.go); ApiVersions is derived from this table.
type api struct {
	kind  apiKind
	begin beginFunc
}

// apiTable is the one list of APIs this package serves. Anything else
// (inter-broker and KRaft APIs, share groups, ...) is never advertised and
// answered with UNSUPPORTED_VERSION.
var apiTable = func() (t [numKeys]api) {
	set := func(kind apiKind, begin beginFunc, keys ...kmsg.Key) {
		for _, k := range keys {
			t[k] = api{kind: kind, begin: begin}
		}
	}
	set(kindPartition, (*Dispatcher).beginProduce, kmsg.Produce)
	set(kindPartition, (*Dispatcher).beginFetch, kmsg.Fetch)
	set(kindPartition, (*Dispatcher).beginOffsets, kmsg.ListOffsets, kmsg.OffsetForLeaderEpoch, kmsg.DeleteRecords)
	set(kindLocal, (*Dispatcher).beginMetadata, kmsg.Metadata)
	set(kindLocal, (*Dispatcher).beginApiVersions, kmsg.ApiVersions)
	set(kindLocal, (*Dispatcher).beginFindCoordinator, kmsg.FindCoordinator)
	set(kindLocal, (*Dispatcher).beginDescribeCluster, kmsg.DescribeCluster)
	set(kindLocal, (*Dispatcher).beginACLs, kmsg.CreateACLs, kmsg.DescribeACLs, kmsg.DeleteACLs)
	set(kindGroup, (*Dispatcher).beginGroup,
		kmsg.OffsetCommit, kmsg.OffsetFetch, kmsg.JoinGroup, kmsg.Heartbeat, kmsg.LeaveGroup,
		kmsg.SyncGroup, kmsg.DescribeGroups, kmsg.TxnOffsetCommit, kmsg.DeleteGroups, kmsg.OffsetDelete,
		kmsg.ConsumerGroupHeartbeat, kmsg.ConsumerGroupDescribe)
	set(kindFanOut, (*Dispatcher).beginListGroups, kmsg.ListGroups)
	// SASL exchanges run in the client connection (package proxy); these
	// answer SASL outside one, and the SCRAM credential APIs (KIP-554).
	set(kindLocal, (*Dispatcher).beginSASL, kmsg.SASLHandshake, kmsg.SASLAuthenticate)
	set(kindLocal, (*Dispatcher).beginDescribeSCRAM, kmsg.DescribeUserSCRAMCredentials)
	set(kindLocal, (*Dispatcher).beginAlterSCRAM, kmsg.AlterUserSCRAMCredentials)
	set(kindAny, (*Dispatcher).beginAdmin,
		kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.InitProducerID, kmsg.AddPartitionsToTxn,
		kmsg.AddOffsetsToTxn, kmsg.EndTxn,
		kmsg.DescribeConfigs, kmsg.AlterConfigs, kmsg.DescribeLogDirs, kmsg.CreatePartitions,
		kmsg.IncrementalAlterConfigs)
	set(kindLocal, (*Dispatcher).beginDescribeClientQuotas, kmsg.DescribeClientQuotas)
	set(kindLocal, (*Dispatcher).beginAlterClientQuotas, kmsg.AlterClientQuotas)
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
