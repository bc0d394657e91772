package testkit_test

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/proxy/apis"
	"github.com/kproxy/kproxy/refbroker/broker"
)

// refBrokerLacks are the APIs the proxy routes to brokers that the
// reference broker does not answer: transactions (it answers InitProducerId
// for idempotence only), altering configs, log dirs, and the consumer group
// protocol of KIP-848. A client
// of `kproxy dev` gets UNSUPPORTED_VERSION for them from the proxy (the
// broker does not list them); brokers that have them serve them through the
// proxy.
var refBrokerLacks = []kmsg.Key{
	kmsg.AddPartitionsToTxn, kmsg.AddOffsetsToTxn, kmsg.EndTxn, kmsg.TxnOffsetCommit,
	kmsg.AlterConfigs, kmsg.IncrementalAlterConfigs, kmsg.DescribeLogDirs,
	kmsg.ConsumerGroupHeartbeat, kmsg.ConsumerGroupDescribe,
}

// apiListProblems compares the reference broker's APIs (ref) with what the
// proxy serves (served) and routes to brokers (routed), given the routed
// APIs the broker is known to lack.
func apiListProblems(ref, served, routed []int16, lacks []kmsg.Key) []string {
	var p []string
	for _, k := range ref {
		if !slices.Contains(served, k) {
			p = append(p, "the reference broker answers "+kmsg.NameForKey(k)+", which the proxy's table does not serve")
		}
	}
	for _, k := range routed {
		in, lacked := slices.Contains(ref, k), slices.Contains(lacks, kmsg.Key(k))
		switch {
		case !in && !lacked:
			p = append(p, "the proxy routes "+kmsg.NameForKey(k)+" to brokers; the reference broker does not answer it and refBrokerLacks does not say so")
		case in && lacked:
			p = append(p, "refBrokerLacks names "+kmsg.NameForKey(k)+", which the reference broker answers")
		}
	}
	for _, k := range lacks {
		if !slices.Contains(routed, int16(k)) {
			p = append(p, "refBrokerLacks names "+k.Name()+", which the proxy does not route to brokers")
		}
	}
	return p
}

// TestRefBrokerAPIsMatchTheProxy checks the reference broker's API list
// against the proxy's table in both directions, so neither drifts alone.
func TestRefBrokerAPIsMatchTheProxy(t *testing.T) {
	ref := broker.ImplementedKeys()
	if len(ref) < 20 || len(apis.RoutedKeys()) < 20 {
		t.Fatalf("%d reference broker APIs, %d routed: the check would prove nothing", len(ref), len(apis.RoutedKeys()))
	}
	for _, p := range apiListProblems(ref, apis.ImplementedKeys(), apis.RoutedKeys(), refBrokerLacks) {
		t.Error(p)
	}
	// Each direction is flagged.
	if got := apiListProblems([]int16{0, 99}, []int16{0, 1}, []int16{0, 1}, nil); len(got) != 2 {
		t.Errorf("apiListProblems flags %q, want the unserved key 99 and the unanswered key 1", got)
	}
}
