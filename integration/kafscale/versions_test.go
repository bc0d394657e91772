package kafscale

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafscaleVersions is the ApiVersions table KafScale's brokers answer
// (July 2026): supported keys with their ranges, and keys it lists as
// unsupported with -1/-1.
var kafscaleVersions = []kmsg.ApiVersionsResponseApiKey{
	{ApiKey: 18, MinVersion: 0, MaxVersion: 4}, {ApiKey: 3, MinVersion: 0, MaxVersion: 12},
	{ApiKey: 0, MinVersion: 0, MaxVersion: 9}, {ApiKey: 1, MinVersion: 11, MaxVersion: 13},
	{ApiKey: 10, MinVersion: 3, MaxVersion: 3}, {ApiKey: 2, MinVersion: 0, MaxVersion: 4},
	{ApiKey: 11, MinVersion: 4, MaxVersion: 4}, {ApiKey: 14, MinVersion: 4, MaxVersion: 4},
	{ApiKey: 12, MinVersion: 4, MaxVersion: 4}, {ApiKey: 13, MinVersion: 4, MaxVersion: 4},
	{ApiKey: 8, MinVersion: 3, MaxVersion: 3}, {ApiKey: 9, MinVersion: 5, MaxVersion: 5},
	{ApiKey: 15, MinVersion: 5, MaxVersion: 5}, {ApiKey: 16, MinVersion: 0, MaxVersion: 5},
	{ApiKey: 23, MinVersion: 3, MaxVersion: 3}, {ApiKey: 32, MinVersion: 4, MaxVersion: 4},
	{ApiKey: 33, MinVersion: 1, MaxVersion: 1}, {ApiKey: 37, MinVersion: 0, MaxVersion: 3},
	{ApiKey: 19, MinVersion: 0, MaxVersion: 2}, {ApiKey: 20, MinVersion: 0, MaxVersion: 2},
	{ApiKey: 42, MinVersion: 0, MaxVersion: 2},
	{ApiKey: 4, MinVersion: -1, MaxVersion: -1}, {ApiKey: 5, MinVersion: -1, MaxVersion: -1},
	{ApiKey: 6, MinVersion: -1, MaxVersion: -1}, {ApiKey: 7, MinVersion: -1, MaxVersion: -1},
	{ApiKey: 21, MinVersion: -1, MaxVersion: -1}, {ApiKey: 22, MinVersion: -1, MaxVersion: -1},
	{ApiKey: 24, MinVersion: -1, MaxVersion: -1}, {ApiKey: 25, MinVersion: -1, MaxVersion: -1},
	{ApiKey: 26, MinVersion: -1, MaxVersion: -1},
}

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

// TestApiVersionsIntersectKafScale: with brokers answering KafScale's
// table, the proxy advertises, for every API it sends to brokers, only
// versions inside KafScale's range (nothing for keys KafScale marks -1),
// while the APIs it answers itself (Metadata, FindCoordinator,
// ApiVersions) keep its own ranges; and clients produce
// and consume in a group within it. kcat (librdkafka 2.0.2) enables
// fetching only if the Fetch range includes v4: with KafScale's stock
// Fetch v11-13 it cannot consume (through any proxy); with KafScale
// advertising Fetch from v4 (its handler already serves any version up
// to 13) it can, through kproxy, with no proxy change.
func TestApiVersionsIntersectKafScale(t *testing.T) {
	cases := []struct {
		name      string
		table     []kmsg.ApiVersionsResponseApiKey
		fetchMin  int16
		kcatReads bool
	}{
		{"stock KafScale table", kafscaleVersions, 11, false},
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
		if ok && (b.MinVersion < 0 || k.MinVersion < b.MinVersion || k.MaxVersion > b.MaxVersion) {
			t.Errorf("proxy advertises %s v%d-%d; KafScale serves v%d-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, b.MinVersion, b.MaxVersion)
		}
	}
	if f := advertised[int16(kmsg.Fetch)]; f.MinVersion != fetchMin || f.MaxVersion != 13 {
		t.Errorf("proxy advertises Fetch v%d-%d, want the intersection v%d-13", f.MinVersion, f.MaxVersion, fetchMin)
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
