package main

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDevSecureAnonymousGroups runs `kproxy dev --secure`: the plaintext
// listener's anonymous clients consume in a group of their own
// (anonymous-*) and commit its offsets, but may not commit offsets to a
// SASL user's group (GROUP_AUTHORIZATION_FAILED). Before, they had Read on
// every group; dev started again on a data dir where an earlier one wrote
// that binding removes it.
func TestDevSecureAnonymousGroups(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ready := regexp.MustCompile(`(?s)bootstrap:\s+(\S+).*kcat -F \S+ -b (\S+) -L`)
	t.Run("an earlier dev's Read on every group", func(t *testing.T) {
		m, _ := runDevSecure(t, ctx, dir, ready)
		res, err := devAdminClient(t, dir, m[2]).CreateACLs(ctx, kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().
			Groups("*").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
		if err := firstResultErr(res, err, func(r kadm.CreateACLsResult) error { return r.Err }); err != nil {
			t.Fatalf("admin writes the old binding: %v", err)
		}
	}) // that dev stops here
	m, _ := runDevSecure(t, ctx, dir, ready)
	plain, secure := m[1], m[2]
	admin := devAdminClient(t, dir, secure)
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatalf("admin creates orders: %v", err)
	}
	const own = devAnonymousGroupPrefix + "app"
	cl, err := kgo.NewClient(kgo.SeedBrokers(plain), kgo.ConsumeTopics("orders"), kgo.ConsumerGroup(own),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if perr := produceOnceBound(ctx, cl, "orders"); perr != nil {
		t.Fatalf("anonymous produce: %v", perr)
	}
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	fs := cl.PollRecords(fctx, 1)
	fcancel()
	if fs.NumRecords() != 1 {
		t.Fatalf("anonymous consume in group %s: %d records, errors %v", own, fs.NumRecords(), fs.Errors())
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("anonymous commit in its own group %s: %v", own, err)
	}

	anon := kadm.NewClient(cl)
	for _, group := range []string{"alice-app", "payments"} { // a SASL user's groups
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 0, LeaderEpoch: -1})
		res, err := anon.CommitOffsets(ctx, group, offs)
		if err == nil {
			err = res.Error()
		}
		if !errors.Is(err, kerr.GroupAuthorizationFailed) {
			t.Errorf("anonymous commit to group %s: %v, want GROUP_AUTHORIZATION_FAILED", group, err)
		}
	}
}

// produceOnceBound produces one record to topic as soon as dev's bindings
// have reached the proxy's watch (retrying for at most 15 s); it returns
// the last error.
func produceOnceBound(ctx context.Context, cl *kgo.Client, topic string) error {
	for deadline := time.Now().Add(15 * time.Second); ; {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		err := cl.ProduceSync(rctx, &kgo.Record{Topic: topic, Value: []byte("anon")}).FirstErr()
		rcancel()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
