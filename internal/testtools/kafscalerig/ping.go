package kafscalerig

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kproxy/kproxy/internal/testtools/testrig"
)

// Ping asks the Kafka listener at addr for its API versions. The client is
// capped at Kafka 3.0's versions: KafScale's broker closes a connection
// whose ApiVersions request it does not accept.
func Ping(ctx context.Context, addr string) error {
	return testrig.PingWith(ctx, addr, kgo.MaxVersions(kversion.V3_0_0()))
}

// DirectOpts are the kgo options a client talking to a KafScale broker
// directly (not through a proxy) needs.
func DirectOpts(addrs ...string) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.MaxVersions(kversion.V3_0_0())}
}
