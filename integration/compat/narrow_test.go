package compat

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/testkit/kafscalever"
)

// narrowBrokers runs the client against a cluster of its own whose
// brokers speak KafScale's version ranges only (see capabilityDoc).
func (h *harness) narrowBrokers(t *testing.T) (string, error) {
	if h.kind.name != devclusterKind.name {
		return "runs on the dev cluster only (kfake has no proxy to bridge versions)", errNotSupported
	}
	ctx, cancel := h.within(240 * time.Second)
	defer cancel()
	nh, closeCluster, err := h.ownCluster(ctx, t, "narrow", func(cfg *devcluster.Config) { cfg.BrokerVersions = kafscalever.Versions() })
	if err != nil {
		return "", err
	}
	defer closeCluster()
	if err := offersFetchV4(ctx, nh.tg.bootstrap()); err != nil {
		return "", err
	}
	if k, ok := h.d.(kcatDriver); ok {
		if err := k.offersFetchV4(ctx, nh.tg.bootstrap()[0]); err != nil {
			return "", err
		}
	}
	topic, err := nh.topic(ctx, "narrow")
	if err != nil {
		return "", err
	}
	recs := makeRecords(topic, 0, 300)
	if err := produceAll(ctx, nh.d, nh.tg.bootstrap(), topic, recs, produceOpts{}); err != nil {
		return "", err
	}
	if err := nh.readBack(ctx, t, topic, recs, 60*time.Second); err != nil {
		return "", err
	}
	return "", nh.readGroup(ctx, t, topic, recs)
}

// readGroup reads topic with one member of a new group until it holds
// every record of want.
func (h *harness) readGroup(ctx context.Context, t *testing.T, topic string, want []Rec) error {
	s, err := h.startConsumer(ctx, t, topic, topic+"-g")
	if err != nil {
		return err
	}
	col := collect(s)
	wantSet := valueSet(want)
	waitErr := col.waitUntil(ctx, 90*time.Second, fmt.Sprintf("group member to consume %d records", len(want)), func(per [][]Rec) bool {
		return countValues(per, wantSet) >= len(want)
	})
	stopErr := s.stop(ctx)
	if _, err := verify(want, dedupe(col.all()), verifyOpts{allowStoredDuplicates: true}); err != nil {
		return fmt.Errorf("group read: %w (wait: %v, consumer: %v)", err, waitErr, stopErr)
	}
	if stopErr != nil {
		return fmt.Errorf("group read: consumer: %w", stopErr)
	}
	return nil
}

// offersFetchV4 asks the proxy for its versions as librdkafka does
// (ApiVersions v3 with its software name) and checks that Fetch v4 is
// offered: librdkafka 2.0.2 enables MsgVer2 (magic-2 batches) and fetching
// only if it is.
func offersFetchV4(ctx context.Context, bootstrap []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		return fmt.Errorf("ApiVersions client: %w", err)
	}
	defer cl.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, "librdkafka", "2.0.2"
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("ApiVersions v3: %w", err)
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == int16(kmsg.Fetch) {
			if k.MinVersion > 4 || k.MaxVersion < 4 {
				return fmt.Errorf("the proxy offers Fetch v%d-%d: without v4 librdkafka 2.0.2 cannot use magic-2 batches", k.MinVersion, k.MaxVersion)
			}
			return nil
		}
	}
	return fmt.Errorf("the proxy does not offer Fetch")
}

// kcatFetchRange is librdkafka's protocol debug line for Fetch.
var kcatFetchRange = regexp.MustCompile(`ApiKey Fetch \(1\) Versions (\d+)\.\.(\d+)`)

// offersFetchV4 runs `kcat -L -d protocol` and checks the Fetch range
// librdkafka was offered includes v4.
func (kcatDriver) offersFetchV4(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// One short run: its whole debug output (stderr) is wanted.
	out, err := exec.CommandContext(ctx, "kcat", "-b", addr, "-L", "-d", "feature,protocol", "-m", "20").CombinedOutput()
	m := kcatFetchRange.FindSubmatch(out)
	if m == nil {
		return fmt.Errorf("kcat -L -d protocol shows no Fetch range (exit: %v): %s", err, tail(out, 2000))
	}
	lo, _ := strconv.Atoi(string(m[1]))
	hi, _ := strconv.Atoi(string(m[2]))
	if lo > 4 || hi < 4 {
		return fmt.Errorf("kcat was offered Fetch v%d-%d, without v4", lo, hi)
	}
	return nil
}

// tail is the last n bytes of b, for error messages.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
