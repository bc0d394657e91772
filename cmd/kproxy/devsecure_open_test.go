package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestDevSecurePlaintextOnlyProducesAndConsumes runs `kproxy dev --secure`:
// the plaintext listener's anonymous clients may produce and consume, and
// are refused, with Kafka's codes, everything that would administer the
// secure listener (ACLs, quotas, topics, users).
func TestDevSecurePlaintextOnlyProducesAndConsumes(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	m, _ := runDevSecure(t, ctx, dir, regexp.MustCompile(`(?s)bootstrap:\s+(\S+).*kcat -F \S+ -b (\S+) -L`))
	plain, secure := m[1], m[2]
	admin := devAdminClient(t, dir, secure)
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "payroll"); err != nil {
		t.Fatalf("admin creates payroll: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(plain), kgo.RequestRetries(0), kgo.ConsumeTopics("payroll"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	anon := kadm.NewClient(cl)

	// Producing and consuming: allowed (once the bindings dev wrote reach
	// the proxy's watch).
	if perr := produceOnceBound(ctx, cl, "payroll"); perr != nil {
		t.Fatalf("anonymous produce on the plaintext listener: %v", perr)
	}
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	fs := cl.PollRecords(fctx, 1)
	fcancel()
	if fs.NumRecords() != 1 {
		t.Fatalf("anonymous consume: %d records, errors %v", fs.NumRecords(), fs.Errors())
	}

	// Everything else: refused.
	refused := func(what string, err error, want *kerr.Error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("anonymous %s: %v, want %s", what, err, want.Message)
		}
	}
	cres, err := anon.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("payroll").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	refused("CreateACLs", firstResultErr(cres, err, func(r kadm.CreateACLsResult) error { return r.Err }), kerr.ClusterAuthorizationFailed)
	dres, err := anon.DeleteACLs(ctx, kadm.NewACLs().Allow("User:ANONYMOUS").AllowHosts().Topics("*").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	refused("DeleteACLs", firstResultErr(dres, err, func(r kadm.DeleteACLsResult) error { return r.Err }), kerr.ClusterAuthorizationFailed)
	qres, err := anon.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: []kadm.ClientQuotaEntityComponent{{Type: "user", Name: kmsg.StringPtr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1e9}},
	}})
	refused("AlterClientQuotas", firstResultErr(qres, err, func(r kadm.AlteredClientQuota) error { return r.Err }), kerr.ClusterAuthorizationFailed)
	ct, err := anon.CreateTopic(ctx, 1, 1, nil, "anon-created")
	refused("CreateTopics", firstErr(err, ct.Err), kerr.TopicAuthorizationFailed)
	dt, err := anon.DeleteTopics(ctx, "payroll")
	var dterr error
	if err == nil {
		if r, ok := dt["payroll"]; ok {
			dterr = r.Err
		}
	}
	refused("DeleteTopics", firstErr(err, dterr), kerr.TopicAuthorizationFailed)
	ar, err := anon.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: devAdmin, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "taken-over"}})
	var arerr error
	if err == nil {
		arerr = errors.New("no result")
		if r, ok := ar[devAdmin]; ok {
			arerr = r.Err
		}
	}
	refused("AlterUserScramCredentials", firstErr(err, arerr), kerr.ClusterAuthorizationFailed)
	if _, err := anon.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Errorf("anonymous DescribeUserScramCredentials: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// firstResultErr is err, else the first error of the per-entry results
// (an empty result list is an error: a refusal must be answered per entry).
func firstResultErr[R any](res []R, err error, errOf func(R) error) error {
	if err != nil {
		return err
	}
	if len(res) == 0 {
		return errors.New("no result")
	}
	for _, r := range res {
		if e := errOf(r); e != nil {
			return e
		}
	}
	return nil
}

// devAdminClient logs in as dev's administrator over SASL_SSL.
func devAdminClient(t *testing.T, dir, addr string) *kadm.Client {
	t.Helper()
	props, err := os.ReadFile(filepath.Join(dir, "client.properties"))
	if err != nil {
		t.Fatal(err)
	}
	pw := regexp.MustCompile(`(?m)^sasl\.password=(.*)$`).FindSubmatch(props)
	if pw == nil {
		t.Fatalf("no password in client.properties:\n%s", props)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
		kgo.SASL(kscram.Auth{User: devAdmin, Pass: string(pw[1])}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}
