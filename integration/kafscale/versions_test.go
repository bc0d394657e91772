package kafscale

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/testkit/kafscalever"
)

// kafscaleVersions is the ApiVersions table KafScale's brokers answer.
var kafscaleVersions = kafscalever.Versions()

// withFetchFrom returns KafScale's table with Fetch advertised from min.
func withFetchFrom(min int16) []kmsg.ApiVersionsResponseApiKey {
	out := append([]kmsg.ApiVersionsResponseApiKey(nil), kafscaleVersions...)
	for i := range out {
		if out[i].ApiKey == int16(kmsg.Fetch) {
			out[i].MinVersion = min
		}
	}
	return out
}

// TestApiVersionsBridgeKafScale: with brokers answering KafScale's table,
// the proxy advertises, for every API it forwards without bridging, only
// versions inside KafScale's range (nothing for keys KafScale marks -1);
// for the APIs it bridges (proxy/apis/bridge.go) at least KafScale's
// range, and Fetch from v4, the version librdkafka 2.0.2 (kcat) needs to
// enable MsgVer2 and fetch at all; the APIs it answers itself (Metadata,
// FindCoordinator, ApiVersions) keep its own ranges. Clients produce and
// consume in a group within it, and kcat consumes, with KafScale's stock
// Fetch v11-13 as with Fetch from v4.
func TestApiVersionsBridgeKafScale(t *testing.T) {
	cases := []struct {
		name      string
		table     []kmsg.ApiVersionsResponseApiKey
		fetchMin  int16
		kcatReads bool
	}{
		{"stock KafScale table", kafscaleVersions, 4, true},
		{"KafScale with Fetch from v4", withFetchFrom(4), 4, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkVersions(t, c.table, c.fetchMin, c.kcatReads) })
	}
}

func checkVersions(t *testing.T, table []kmsg.ApiVersionsResponseApiKey, fetchMin int16, kcatReads bool) {
	const topic = "versions"
	e := newEnv(t, map[string]int32{topic: 3})
	e.fake.ControlKey(int16(kmsg.ApiVersions), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.fake.KeepControl()
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = req.GetVersion()
		resp.ApiKeys = table
		return resp, nil, true
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := e.client()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ApiVersions through the proxy: %v", err)
	}
	ks := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for _, k := range table {
		ks[k.ApiKey] = k
	}
	// Bridged by the proxy (proxy/apis/bridge.go).
	bridged := map[int16]bool{}
	for _, k := range []kmsg.Key{kmsg.Produce, kmsg.Fetch, kmsg.ListOffsets, kmsg.OffsetCommit, kmsg.OffsetFetch,
		kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.LeaveGroup, kmsg.DescribeGroups} {
		bridged[int16(k)] = true
	}
	// Answered by the proxy itself, at its own versions.
	local := map[int16]bool{int16(kmsg.Metadata): true, int16(kmsg.FindCoordinator): true, int16(kmsg.ApiVersions): true, int16(kmsg.DescribeCluster): true}
	advertised := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for _, k := range resp.ApiKeys {
		advertised[k.ApiKey] = k
		if local[k.ApiKey] {
			continue
		}
		// Keys KafScale does not list are either answered by the proxy
		// (SASL, quotas, ...) or not advertised; those it lists are
		// forwarded and must stay inside its range.
		b, ok := ks[k.ApiKey]
		switch {
		case !ok:
		case bridged[k.ApiKey]:
			if k.MinVersion > b.MinVersion || k.MaxVersion < b.MaxVersion {
				t.Errorf("proxy advertises %s v%d-%d, less than KafScale's v%d-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, b.MinVersion, b.MaxVersion)
			}
		case b.MinVersion < 0 || k.MinVersion < b.MinVersion || k.MaxVersion > b.MaxVersion:
			t.Errorf("proxy advertises %s v%d-%d; KafScale serves v%d-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, b.MinVersion, b.MaxVersion)
		}
	}
	if f := advertised[int16(kmsg.Fetch)]; f.MinVersion != fetchMin || f.MaxVersion < 13 {
		t.Errorf("proxy advertises Fetch v%d-%d, want v%d-13 or more", f.MinVersion, f.MaxVersion, fetchMin)
	}
	if fc := advertised[int16(kmsg.FindCoordinator)]; fc.MinVersion != 0 || fc.MaxVersion < 3 {
		t.Errorf("FindCoordinator is answered by the proxy at every version, advertised v%d-%d", fc.MinVersion, fc.MaxVersion)
	}
	for _, k := range []kmsg.Key{kmsg.InitProducerID, kmsg.DeleteRecords, kmsg.EndTxn} {
		if a, ok := advertised[int16(k)]; ok {
			t.Errorf("proxy advertises %s v%d-%d, which KafScale marks unsupported", kmsg.NameForKey(int16(k)), a.MinVersion, a.MaxVersion)
		}
	}

	// Clients negotiate within that table.
	producer := e.client(kgo.DefaultProduceTopic(topic))
	for i := range 30 {
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce with KafScale's versions: %v", err)
		}
	}
	consumer := e.client(kgo.ConsumerGroup("versions-group"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if got := pollUntil(ctx, t, consumer, 30); len(got) != 30 {
		t.Errorf("group consumer read %d of 30 records", len(got))
	}
	if c := kcatKit(); kcatReads && c.unavailable() == "" {
		got, err := c.consume(ctx, e.srv.Addr(), topic, 30)
		if err != nil || len(got) != 30 {
			t.Errorf("kcat: %d records, %v", len(got), err)
		}
	}
}
