package security

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/security/audit"
	"github.com/kproxy/kproxy/proxy/security/credstore"
	"github.com/kproxy/kproxy/proxy/security/principal"
	"github.com/kproxy/kproxy/proxy/security/sasl"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// twoReplicas runs two proxies, each with a SASL_PLAINTEXT listener whose
// users come from etcd; User:admin may manage them.
func twoReplicas(t *testing.T, auditLog *testrig.SyncBuffer) (*devcluster.Cluster, [2]string) {
	t.Helper()
	c := startCluster(t, 2, func(_ int, cfg *assembly.Config) {
		cfg.Listeners = []listener.Listener{{Name: "SASL_PLAINTEXT", Protocol: listener.SASLPlaintext, Addr: "127.0.0.1:0"}}
		cfg.Security.SASL = &sasl.Config{Mechanisms: []string{sasl.ScramSHA512, sasl.ScramSHA256}, FailureDelay: 20 * time.Millisecond}
		cfg.Security.SuperUsers = []principal.Principal{principal.User("admin")}
		cfg.Security.Audit = audit.New(auditLog)
	})
	return c, [2]string{c.Proxy(0).ListenerAddr("SASL_PLAINTEXT"), c.Proxy(1).ListenerAddr("SASL_PLAINTEXT")}
}

// bootstrapUser writes a user's credentials to etcd directly, as `kproxy
// users add` does.
func bootstrapUser(t *testing.T, c *devcluster.Cluster, user, pass string) {
	t.Helper()
	if _, err := credstore.PutPassword(testContext(t, 10*time.Second), c.Client(), layout.New(""), user, pass, credstore.Mechanisms, credstore.MinIterations); err != nil {
		t.Fatal(err)
	}
}

func admin(t *testing.T, addr, user, pass string) *kadm.Client {
	return kadm.NewClient(newClient(t, addr, scram512(user, pass), kgo.RequestRetries(0)))
}

func authErr(t *testing.T, addr, user, pass string) error {
	t.Helper()
	ctx := testContext(t, 10*time.Second)
	cl := newClient(t, addr, scram512(user, pass), kgo.RequestRetries(0))
	_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	return err
}

// TestCredentialsAcrossReplicas: users managed through kadm on one replica
// can (and after a change, cannot) authenticate on the other within a
// second.
func TestCredentialsAcrossReplicas(t *testing.T) {
	var log testrig.SyncBuffer
	c, addrs := twoReplicas(t, &log)
	ctx := testContext(t, 60*time.Second)
	// The first administrator, as `kproxy users add` would create it.
	bootstrapUser(t, c, "admin", "admin-secret")
	waitFor(t, 5*time.Second, "admin on replica 0", func() bool { return authErr(t, addrs[0], "admin", "admin-secret") == nil })

	adm := admin(t, addrs[0], "admin", "admin-secret")
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-1"}})
	if err != nil || res.Error() != nil {
		t.Fatalf("alter: %v, %v", err, res.Error())
	}
	start := time.Now()
	waitFor(t, time.Second, "bob on replica 1 within a second", func() bool { return authErr(t, addrs[1], "bob", "bob-1") == nil })
	t.Logf("new user usable on the other replica after %v", time.Since(start))

	described, err := adm.DescribeUserSCRAMs(ctx, "bob")
	if err != nil || described.Error() != nil {
		t.Fatalf("describe: %v, %v", err, described.Error())
	}
	if d := described["bob"]; len(d.CredInfos) != 1 || d.CredInfos[0].Mechanism != kadm.ScramSha512 || d.CredInfos[0].Iterations != 4096 {
		t.Fatalf("bob described as %+v", d)
	}

	if _, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "bob-2"}}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	waitFor(t, time.Second, "bob's old password refused on replica 1", func() bool {
		return errors.Is(authErr(t, addrs[1], "bob", "bob-1"), kerr.SaslAuthenticationFailed)
	})
	t.Logf("changed password effective on the other replica after %v", time.Since(start))
	if err := authErr(t, addrs[1], "bob", "bob-2"); err != nil {
		t.Fatalf("bob's new password on replica 1: %v", err)
	}

	// Bob is no super user: he may not manage credentials.
	bobAdm := admin(t, addrs[1], "bob", "bob-2")
	if res, err := bobAdm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "eve", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "x"}}); !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(res["eve"].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alter by bob: %v, %+v; want CLUSTER_AUTHORIZATION_FAILED", err, res)
	}
	if _, err := bobAdm.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("describe by bob: %v; want CLUSTER_AUTHORIZATION_FAILED", err)
	}

	res, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || res.Error() != nil {
		t.Fatalf("delete: %v, %v", err, res.Error())
	}
	waitFor(t, time.Second, "bob refused on replica 1 after deletion", func() bool {
		return errors.Is(authErr(t, addrs[1], "bob", "bob-2"), kerr.SaslAuthenticationFailed)
	})
	res, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha512}}, nil)
	if !errors.Is(err, kerr.ResourceNotFound) && !errors.Is(res["bob"].Err, kerr.ResourceNotFound) {
		t.Fatalf("second delete: %v, %+v; want RESOURCE_NOT_FOUND", err, res)
	}
	for _, want := range []string{`"event":"credential_changed","listener":"SASL_PLAINTEXT","principal":"User:admin","mechanism":"SCRAM-SHA-512","user":"bob"`, `"event":"credential_deleted"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("audit log lacks %s:\n%s", want, log.String())
		}
	}
	if strings.Contains(log.String(), "bob-1") || strings.Contains(log.String(), "bob-2") {
		t.Error("audit log holds a password")
	}
	// kadm refuses too few iterations itself; the proxy does as Kafka.
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		{Name: "carol", Mechanism: 2, Iterations: 100, Salt: []byte("salt"), SaltedPassword: make([]byte, 64)},
		{Name: "dave", Mechanism: 9, Iterations: 4096, Salt: []byte("salt"), SaltedPassword: make([]byte, 64)},
	}
	raw, err := req.RequestWith(ctx, newClient(t, addrs[0], scram512("admin", "admin-secret")))
	if err != nil {
		t.Fatal(err)
	}
	if len(raw.Results) != 2 || raw.Results[0].ErrorCode != kerr.UnacceptableCredential.Code || raw.Results[1].ErrorCode != kerr.UnsupportedSaslMechanism.Code {
		t.Fatalf("alter results %+v; want UNACCEPTABLE_CREDENTIAL for carol, UNSUPPORTED_SASL_MECHANISM for dave", raw.Results)
	}
}
