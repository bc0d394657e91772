package broker

import (
	"cmp"
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/refbroker/broker/group"
)

// handler answers one decoded request.
type handler func(b *Broker, ctx context.Context, c *conn, h header, req kmsg.Request) kmsg.Response

// versionRange is what the broker implements of one API. Every minimum is
// 0: librdkafka 2.0 enables compression only when the broker lists Produce
// v0 (and lz4 only with FindCoordinator v0). The log holds magic-2 batches
// only: a produce of older message formats is refused per partition with
// UNSUPPORTED_FOR_MESSAGE_FORMAT, and Fetch below v4 (which no client
// negotiates against a broker that offers v4+) returns the batches as
// stored.
type versionRange struct{ min, max int16 }

// api is what the broker serves of one API key.
type api struct {
	versions versionRange
	// handle answers the request; nil for Produce and ApiVersions, which
	// the connection treats specially (ordering, the connection's mode).
	handle handler
}

// implemented is the one table of APIs this broker answers, from which
// ApiVersions is derived; anything else (including all transactional APIs)
// is not advertised and closes the connection.
var implemented = map[kmsg.Key]api{
	kmsg.Produce:              {versionRange{0, 13}, nil},
	kmsg.Fetch:                {versionRange{0, 18}, (*Broker).handleFetch},
	kmsg.ListOffsets:          {versionRange{0, 11}, (*Broker).handleListOffsets},
	kmsg.Metadata:             {versionRange{0, 13}, (*Broker).handleMetadata},
	kmsg.OffsetCommit:         {versionRange{0, 10}, (*Broker).handleGroupRequest},
	kmsg.OffsetFetch:          {versionRange{0, 10}, (*Broker).handleGroupRequest},
	kmsg.FindCoordinator:      {versionRange{0, 6}, (*Broker).handleFindCoordinator},
	kmsg.JoinGroup:            {versionRange{0, 9}, (*Broker).handleGroupRequest},
	kmsg.Heartbeat:            {versionRange{0, 4}, (*Broker).handleGroupRequest},
	kmsg.LeaveGroup:           {versionRange{0, 5}, (*Broker).handleGroupRequest},
	kmsg.SyncGroup:            {versionRange{0, 5}, (*Broker).handleGroupRequest},
	kmsg.DescribeGroups:       {versionRange{0, 6}, (*Broker).handleGroupRequest},
	kmsg.ListGroups:           {versionRange{0, 5}, (*Broker).handleGroupRequest},
	kmsg.ApiVersions:          {versionRange{0, 4}, nil},
	kmsg.CreateTopics:         {versionRange{0, 7}, (*Broker).handleCreateTopics},
	kmsg.DeleteTopics:         {versionRange{0, 6}, (*Broker).handleDeleteTopics},
	kmsg.DeleteRecords:        {versionRange{0, 2}, (*Broker).handleDeleteRecords},
	kmsg.InitProducerID:       {versionRange{0, 5}, (*Broker).handleInitProducerID},
	kmsg.OffsetForLeaderEpoch: {versionRange{0, 4}, (*Broker).handleOffsetForLeaderEpoch},
	kmsg.DescribeConfigs:      {versionRange{0, 4}, (*Broker).handleDescribeConfigs},
	kmsg.CreatePartitions:     {versionRange{0, 3}, (*Broker).handleCreatePartitions},
	kmsg.DeleteGroups:         {versionRange{0, 2}, (*Broker).handleGroupRequest},
	kmsg.OffsetDelete:         {versionRange{0, 0}, (*Broker).handleGroupRequest},
	kmsg.DescribeCluster:      {versionRange{0, 2}, (*Broker).handleDescribeCluster},
}

func (b *Broker) supports(key, version int16) bool {
	r, ok := b.table()[kmsg.Key(key)]
	return ok && version >= r.min && version <= r.max
}

// table is what the broker serves: implemented, narrowed by
// Config.Versions (a Broker built without withDefaults serves all of it).
func (b *Broker) table() map[kmsg.Key]versionRange {
	if b.cfg.served == nil {
		return everyImplemented
	}
	return b.cfg.served
}

// everyImplemented is implemented's ranges, unnarrowed (read-only).
var everyImplemented = narrowed(nil)

// narrowed is implemented's ranges limited by limits (Config.Versions).
func narrowed(limits []kmsg.ApiVersionsResponseApiKey) map[kmsg.Key]versionRange {
	out := make(map[kmsg.Key]versionRange, len(implemented))
	for key, a := range implemented {
		out[key] = a.versions
	}
	for _, l := range limits {
		r, ok := out[kmsg.Key(l.ApiKey)]
		if !ok {
			continue
		}
		r = versionRange{max(r.min, l.MinVersion), min(r.max, l.MaxVersion)}
		if l.MinVersion < 0 || r.min > r.max {
			delete(out, kmsg.Key(l.ApiKey))
			continue
		}
		out[kmsg.Key(l.ApiKey)] = r
	}
	return out
}

func (b *Broker) apiKeys() []kmsg.ApiVersionsResponseApiKey {
	t := b.table()
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(t))
	for key, r := range t {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: int16(key), MinVersion: r.min, MaxVersion: r.max})
	}
	slices.SortFunc(out, func(x, y kmsg.ApiVersionsResponseApiKey) int { return cmp.Compare(x.ApiKey, y.ApiKey) })
	return out
}

// answersUnordered reports whether a connection that sent req gets its
// responses as soon as they are ready (and so is told
// layout.UnorderedResponsesFeature): only the proxy's connections, which
// identify themselves with ApiVersions v3+ ClientSoftwareName "kproxy" and
// match responses by correlation id.
func answersUnordered(req *kmsg.ApiVersionsRequest) bool {
	return req.Version >= 3 && req.ClientSoftwareName == "kproxy"
}

func (b *Broker) apiVersions(req *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = b.apiKeys()
	if b.answersUnordered(req) {
		f := kmsg.NewApiVersionsResponseSupportedFeature()
		f.Name, f.MinVersion, f.MaxVersion = layout.UnorderedResponsesFeature, 1, 1
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
	resp.ApiKeys = b.apiKeys()
	return resp
}

func (b *Broker) handleGroupRequest(ctx context.Context, c *conn, h header, req kmsg.Request) kmsg.Response {
	cl := group.Client{Host: c.remoteHost()}
	if h.clientID != nil {
		cl.ID = *h.clientID
	}
	return b.groups.Handle(ctx, req, cl)
}

// ImplementedKeys lists the API keys the reference broker answers, in key
// order (testkit checks them against the proxy's table).
func ImplementedKeys() []int16 {
	keys := make([]int16, 0, len(implemented))
	for k := range implemented {
		keys = append(keys, int16(k))
	}
	slices.Sort(keys)
	return keys
}
