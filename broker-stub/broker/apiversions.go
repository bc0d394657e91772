package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/broker-stub/broker/group"
)

const (
	produceKey     = 0
	apiVersionsKey = 18
)

// handler answers one decoded request.
type handler func(ctx context.Context, c *conn, h header, req kmsg.Request) kmsg.Response

// versionRange is what the broker implements of one API. Every minimum is
// 0: librdkafka 2.0 enables compression only when the broker lists Produce
// v0 (and lz4 only with FindCoordinator v0). The log holds magic-2 batches
// only: a produce of older message formats is refused per partition with
// UNSUPPORTED_FOR_MESSAGE_FORMAT, and Fetch below v4 (which no client
// negotiates against a broker that offers v4+) returns the batches as
// stored.
type versionRange struct{ min, max int16 }

// implemented lists every API this broker answers; anything else (including
// all transactional APIs) is not advertised and closes the connection.
var implemented = map[int16]versionRange{
	0:  {0, 13}, // Produce
	1:  {0, 18}, // Fetch
	2:  {0, 11}, // ListOffsets
	3:  {0, 13}, // Metadata
	8:  {0, 10}, // OffsetCommit
	9:  {0, 10}, // OffsetFetch
	10: {0, 6},  // FindCoordinator
	11: {0, 9},  // JoinGroup
	12: {0, 4},  // Heartbeat
	13: {0, 5},  // LeaveGroup
	14: {0, 5},  // SyncGroup
	15: {0, 6},  // DescribeGroups
	16: {0, 5},  // ListGroups
	18: {0, 4},  // ApiVersions
	19: {0, 7},  // CreateTopics
	20: {0, 6},  // DeleteTopics
	21: {0, 2},  // DeleteRecords
	22: {0, 5},  // InitProducerID
	23: {0, 4},  // OffsetForLeaderEpoch
	32: {0, 4},  // DescribeConfigs
	37: {0, 3},  // CreatePartitions
	42: {0, 2},  // DeleteGroups
	47: {0, 0},  // OffsetDelete
	60: {0, 2},  // DescribeCluster
}

func (b *Broker) supports(key, version int16) bool {
	r, ok := implemented[key]
	return ok && version >= r.min && version <= r.max
}

func apiKeys() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(implemented))
	for key := int16(0); key < 100; key++ {
		if r, ok := implemented[key]; ok {
			out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: key, MinVersion: r.min, MaxVersion: r.max})
		}
	}
	return out
}

// UnorderedResponsesFeature is the KIP-584 supported feature (version 1)
// the broker lists in its ApiVersions response when it will answer that
// connection's requests as soon as each is ready rather than in request
// order. A client multiplexing unrelated requests on one connection must
// not assume out-of-order answers without it: Apache Kafka (and kfake)
// answer one request at a time per connection.
const UnorderedResponsesFeature = "kproxy.unordered-responses"

// answersUnordered reports whether a connection that sent req gets its
// responses as soon as they are ready: only the proxy's connections, which
// identify themselves with ApiVersions v3+ ClientSoftwareName "kproxy" and
// match responses by correlation id.
func answersUnordered(req *kmsg.ApiVersionsRequest) bool {
	return req.Version >= 3 && req.ClientSoftwareName == "kproxy"
}

func (b *Broker) apiVersions(req *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiKeys()
	if answersUnordered(req) {
		f := kmsg.NewApiVersionsResponseSupportedFeature()
		f.Name, f.MinVersion, f.MaxVersion = UnorderedResponsesFeature, 1, 1
		resp.SupportedFeatures = append(resp.SupportedFeatures, f)
	}
	return resp
}

// unsupportedApiVersions is Kafka's answer to an ApiVersions request of a
// version the broker does not know: v0, UNSUPPORTED_VERSION, and the keys,
// so the client can retry with a version both sides speak.
func (b *Broker) unsupportedApiVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiKeys()
	return resp
}

// handlerFor returns the handler of an implemented API other than Produce
// and ApiVersions, which the connection treats specially.
func (b *Broker) handlerFor(key int16) handler {
	switch key {
	case 1:
		return b.handleFetch
	case 2:
		return b.handleListOffsets
	case 3:
		return b.handleMetadata
	case 10:
		return b.handleFindCoordinator
	case 19:
		return b.handleCreateTopics
	case 20:
		return b.handleDeleteTopics
	case 21:
		return b.handleDeleteRecords
	case 22:
		return b.handleInitProducerID
	case 23:
		return b.handleOffsetForLeaderEpoch
	case 32:
		return b.handleDescribeConfigs
	case 37:
		return b.handleCreatePartitions
	case 60:
		return b.handleDescribeCluster
	}
	return b.handleGroupRequest // 8, 9, 11-16, 42, 47
}

func (b *Broker) handleGroupRequest(ctx context.Context, c *conn, h header, req kmsg.Request) kmsg.Response {
	cl := group.Client{Host: c.remoteHost()}
	if h.clientID != nil {
		cl.ID = *h.clientID
	}
	return b.groups.Handle(ctx, req, cl)
}
