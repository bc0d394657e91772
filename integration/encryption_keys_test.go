package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/internal/kwire/kwiretest"
	"github.com/kproxy/kproxy/proxy/crypt"
)

// The keys of record encryption end to end: a KMS outage, two replicas,
// KEK rotation, and the KMS calls each replica makes.

func valuesBatch(vs ...string) []byte {
	return kwiretest.Batch{ProducerID: -1, LeaderEpoch: -1, FirstTimestamp: time.Now().UnixMilli(), Values: kwiretest.Values(vs...)}.Encode()
}

func TestEncryptionKMSOutage(t *testing.T) {
	// A DEK does 4 encryptions: the third batch of two needs a new one.
	p := startEncPool(t, 1, "  timeout: 1s\n", "dek:\n  max_encryptions: 4\n")
	const topic = "secret-outage"
	p.createTopic(t, topic)
	produce := func(vs ...string) int16 { return rawProduce(t, p.proxies[0], topic, 0, valuesBatch(vs...)) }
	if c := produce("plaintext 1", "plaintext 2"); c != 0 {
		t.Fatalf("first produce: %v", kerr.ErrorForCode(c))
	}
	if err := p.moto.Proc.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = p.moto.Proc.Resume()
		}
	}()
	if c := produce("plaintext 3", "plaintext 4"); c != 0 {
		t.Fatalf("produce in the outage, with a DEK cached: %v", kerr.ErrorForCode(c))
	}
	if c := produce("plaintext lost 1", "plaintext lost 2"); c != kerr.KafkaStorageError.Code {
		t.Fatalf("produce in the outage without a usable DEK: code %d, want KAFKA_STORAGE_ERROR (retriable)", c)
	}
	if got := p.kmsCalls(t, 0, "generate", "unavailable"); got < 1 {
		t.Fatalf("kproxy_encryption_kms_calls_total{op=generate,result=unavailable} = %v", got)
	}
	stored := readAll(t, p.brokers, topic, 4)
	checkNoPlaintext(t, stored, [][]byte{[]byte("plaintext")})
	if err := p.moto.Proc.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	waitFor(t, "produce after the KMS returned", 30*time.Second, func() bool { return produce("plaintext 5", "plaintext 6") == 0 })
	got := readAll(t, p.proxies, topic, 6)
	for i, r := range got {
		if want := fmt.Sprintf("plaintext %d", i+1); string(r.Value) != want {
			t.Fatalf("record %d: %q, want %q", i, r.Value, want)
		}
	}
	checkNoPlaintext(t, readAll(t, p.brokers, topic, 6), [][]byte{[]byte("plaintext")})
}

func TestEncryptionTwoReplicasOneKMSCallPerKey(t *testing.T) {
	p := startEncPool(t, 2, "", "")
	const topic = "secret-replicas"
	p.createTopic(t, topic)
	for i, addr := range p.proxies {
		cl := newClient(t, addr, kgo.DefaultProduceTopic(topic))
		for j := range 20 {
			produceSync(t, cl, &kgo.Record{Value: fmt.Appendf(nil, "plaintext from replica %d, %d", i, j)})
		}
	}
	for round := range 2 { // the second round is served from the caches
		for i, addr := range p.proxies {
			got := readAll(t, []string{addr}, topic, 40)
			seen := map[string]bool{}
			for _, r := range got {
				seen[string(r.Value)] = true
			}
			for k := range 2 {
				if !seen[fmt.Sprintf("plaintext from replica %d, 0", k)] {
					t.Fatalf("round %d: replica %d did not decrypt what replica %d wrote", round, i, k)
				}
			}
		}
	}
	// Each replica made one DEK (one lifetime) and unwrapped one: the other's.
	for i := range p.proxies {
		g, d := p.kmsCalls(t, i, "generate", "ok"), p.kmsCalls(t, i, "decrypt", "ok")
		if g != 1 || d != 1 {
			t.Fatalf("replica %d: %v GenerateDataKey and %v Decrypt calls, want 1 and 1", i, g, d)
		}
	}
}

// storedKEK is the KEK moto says wrapped a stored record's DEK.
func storedKEK(t *testing.T, p *encPool, r *kgo.Record) string {
	t.Helper()
	h := r.Headers[len(r.Headers)-1]
	if h.Key != crypt.HeaderKey || len(h.Value) < 2 || h.Value[0] != crypt.FormatVersion {
		t.Fatalf("stored record %d: header %v", r.Offset, h)
	}
	n, k := binary.Uvarint(h.Value[1:])
	t.Logf("wrapped DEK: %d bytes; kproxy.enc header value: %d bytes", n, len(h.Value))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := p.moto.Client().Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: h.Value[1+k : 1+k+int(n)]})
	if err != nil {
		t.Fatalf("moto Decrypt of a stored DEK: %v", err)
	}
	return *out.KeyId
}

func TestEncryptionKEKRotation(t *testing.T) {
	p := startEncPool(t, 2, "", "dek:\n  refresh_after: 1s\n")
	const topic = "secret-rotation"
	p.createTopic(t, topic)
	if c := rawProduce(t, p.proxies[0], topic, 0, valuesBatch("plaintext before")); c != 0 {
		t.Fatal(kerr.ErrorForCode(c))
	}
	newKey := p.moto.Retarget(t, "alias/kproxy-test")
	time.Sleep(1100 * time.Millisecond) // past refresh_after: the next produce asks for a new DEK
	if c := rawProduce(t, p.proxies[0], topic, 0, valuesBatch("plaintext after")); c != 0 {
		t.Fatal(kerr.ErrorForCode(c))
	}
	stored := readAll(t, p.brokers, topic, 2)
	before, after := storedKEK(t, p, stored[0]), storedKEK(t, p, stored[1])
	if before == after || after != newKey && !endsWith(after, newKey) {
		t.Fatalf("KEKs before and after the rotation: %s, %s (new key %s)", before, after, newKey)
	}
	got := readAll(t, p.proxies[1:], topic, 2) // a replica that never saw either DEK
	if string(got[0].Value) != "plaintext before" || string(got[1].Value) != "plaintext after" {
		t.Fatalf("after the rotation: %q, %q", got[0].Value, got[1].Value)
	}
	if d := p.kmsCalls(t, 1, "decrypt", "ok"); d != 2 {
		t.Fatalf("replica 1 made %v Decrypt calls for two unseen DEKs, want 2", d)
	}
}

func endsWith(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}

// A topic whose key the KMS does not know is refused (reject, the
// default): POLICY_VIOLATION, and nothing is stored.
func TestEncryptionUnresolvedKeyRejected(t *testing.T) {
	p := startEncPool(t, 1, "", "  - match: \"nokey-*\"\n    key: alias/absent-{topic}\n")
	const topic = "nokey-orders"
	p.createTopic(t, topic)
	if c := rawProduce(t, p.proxies[0], topic, 0, valuesBatch("plaintext refused")); c != kerr.PolicyViolation.Code {
		t.Fatalf("produce under an unknown key: code %d, want POLICY_VIOLATION", c)
	}
	if got := p.kmsCalls(t, 0, "generate", "refused"); got != 1 {
		t.Fatalf("kproxy_encryption_kms_calls_total{op=generate,result=refused} = %v, want 1", got)
	}
	ans := fetchPartitions(t, p.proxies[0], topic, 0)[0]
	if ans.ErrorCode != 0 || len(ans.RecordBatches) != 0 || ans.HighWatermark != 0 {
		t.Fatalf("after a refused produce: code %d, %d record bytes, high watermark %d", ans.ErrorCode, len(ans.RecordBatches), ans.HighWatermark)
	}
}
