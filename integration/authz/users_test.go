package authz

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/xdg-go/scram"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/security/audit"
	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/proxy/security/credstore"
	"github.com/kproxy/kproxy/proxy/security/principal"
	"github.com/kproxy/kproxy/proxy/security/sasl"
	"github.com/kproxy/kproxy/testkit/saramascram"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// usersEnv is a proxy with a SASL_PLAINTEXT listener (SCRAM against the
// credentials in etcd), deny by default, User:admin a super user; the
// administrator created alice and bob and their bindings through kadm.
type usersEnv struct {
	c     *devcluster.Cluster
	addr  string              // SASL_PLAINTEXT address of proxy 0
	audit *testrig.SyncBuffer // the proxy's audit log
}

var passwords = map[string]string{"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}

func asUser(user string) kgo.Opt {
	return kgo.SASL(kscram.Auth{User: user, Pass: passwords[user]}.AsSha512Mechanism())
}

func startUsers(t *testing.T) *usersEnv {
	t.Helper()
	log := &testrig.SyncBuffer{}
	c := startCluster(t, 1, authz.Config{Mode: authz.DenyByDefault, SuperUsers: []string{"User:admin"}},
		func(_ int, cfg *assembly.Config) {
			cfg.Security.Audit = audit.New(log)
			cfg.Listeners = []listener.Listener{{Name: "SASL_PLAINTEXT", Protocol: listener.SASLPlaintext, Addr: "127.0.0.1:0"}}
			cfg.Security.SASL = &sasl.Config{Mechanisms: []string{sasl.ScramSHA512, sasl.ScramSHA256}}
			cfg.Security.SuperUsers = []principal.Principal{principal.User("admin")}
		})
	env := &usersEnv{c: c, addr: c.Proxy(0).ListenerAddr("SASL_PLAINTEXT"), audit: log}
	ctx := testCtx(t)
	// The first administrator, as `kproxy users add` makes it.
	if _, err := credstore.PutPassword(ctx, c.Client(), layout.New(""), "admin", passwords["admin"], credstore.Mechanisms, credstore.DefaultIterations); err != nil {
		t.Fatal(err)
	}
	if _, err := newAdmin(t, c.BrokerAddr(c.BrokerIDs()[0])).CreateTopics(ctx, 2, -1, nil, "a-orders", "a-secret", "b-other"); err != nil {
		t.Fatal(err)
	}
	adm := newAdmin(t, env.addr, asUser("admin"))
	var ups []kadm.UpsertSCRAM
	for _, u := range []string{"alice", "bob"} {
		ups = append(ups, kadm.UpsertSCRAM{User: u, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: passwords[u]})
	}
	within(t, 2*time.Second, "admin creates alice and bob", func() error {
		res, err := adm.AlterUserSCRAMs(ctx, nil, ups)
		if err == nil {
			err = res.Error()
		}
		return err
	})
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").Topics("a-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite, kadm.OpRead),
		kadm.NewACLs().Deny("User:alice").Topics("a-secret").Operations(kadm.OpAll),
		kadm.NewACLs().Allow("User:bob").Topics("a-orders").Groups("g-bob").Operations(kadm.OpRead),
	} {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("CreateACLs: %v", r.Err)
			}
		}
	}
	return env
}

func topicNames(t *testing.T, cl *kgo.Client) []string {
	t.Helper()
	md, err := kadm.NewClient(cl).Metadata(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	names := md.Topics.Names()
	slices.Sort(names)
	return names
}

// kgo as alice and bob sees Kafka's outcomes.
func TestUsersWithKgo(t *testing.T) {
	env := startUsers(t)
	alice := newClient(t, env.addr, asUser("alice"), kgo.MaxVersions(rawVersions))
	bob := newClient(t, env.addr, asUser("bob"), kgo.MaxVersions(rawVersions))

	// A mixed produce: the allowed partition is written, the denied 29.
	codes := produceRaw(t, alice, "a-orders", "a-secret", "b-other")
	if codes["a-orders"] != 0 || codes["a-secret"] != kerr.TopicAuthorizationFailed.Code || codes["b-other"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice's mixed produce %v: want a-orders 0, a-secret and b-other 29", codes)
	}
	if got := produceRaw(t, bob, "a-orders")["a-orders"]; got != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob's produce to a-orders: code %d, want 29", got)
	}
	// Each denial is an audit event naming who, what and the binding.
	var denial *audit.Event
	for _, line := range strings.Split(env.audit.String(), "\n") {
		var e audit.Event
		if json.Unmarshal([]byte(line), &e) == nil && e.Event == audit.Authorization && e.Principal == "User:alice" && e.Resource == "a-secret" {
			denial = &e
			break
		}
	}
	if denial == nil || denial.Decision != authz.OutcomeDenied || denial.API != "Produce" || denial.Operation != "WRITE" ||
		denial.Client != "127.0.0.1" || denial.Listener != "SASL_PLAINTEXT" || !strings.Contains(denial.Binding, "DENY") {
		t.Fatalf("audit event of alice's denied produce: %+v\nlog:\n%s", denial, env.audit.String())
	}
	// Metadata lists what each may describe.
	if got := topicNames(t, alice); !slices.Equal(got, []string{"a-orders"}) {
		t.Fatalf("alice's topics %v", got)
	}
	if got := topicNames(t, bob); !slices.Equal(got, []string{"a-orders"}) {
		t.Fatalf("bob's topics %v", got)
	}
	// Bob commits in g-bob, not elsewhere (30).
	commit := func(group string) error {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: "a-orders", Partition: 0, At: 1, LeaderEpoch: -1})
		r, err := kadm.NewClient(bob).CommitOffsets(testCtx(t), group, os)
		if err != nil {
			return err
		}
		return r.Error()
	}
	if err := commit("g-bob"); err != nil {
		t.Fatalf("bob commits in g-bob: %v", err)
	}
	if err := commit("g-alice"); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Fatalf("bob commits in g-alice: %v, want GROUP_AUTHORIZATION_FAILED", err)
	}
	// Bob consumes a-orders in his group (past the offset he committed):
	// alice writes more.
	for i := range 4 {
		if err := alice.ProduceSync(testCtx(t), &kgo.Record{Topic: "a-orders", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("alice produces to a-orders: %v", err)
		}
	}
	consumer := newClient(t, env.addr, asUser("bob"), kgo.ConsumerGroup("g-bob"), kgo.ConsumeTopics("a-orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for n := 0; n == 0; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("bob consumed nothing from a-orders in g-bob")
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("bob consuming: %v", err)
		}
		n = fs.NumRecords()
	}
}

func TestUsersWithSarama(t *testing.T) {
	env := startUsers(t)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Net.SASL.Enable, cfg.Net.SASL.Mechanism, cfg.Net.SASL.Version = true, sarama.SASLTypeSCRAMSHA512, sarama.SASLHandshakeV1
	cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", passwords["alice"]
	cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramascram.Client{Hash: scram.SHA512} }
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 0
	cfg.Net.DialTimeout, cfg.Net.ReadTimeout = 5*time.Second, 10*time.Second
	p, err := sarama.NewSyncProducer([]string{env.addr}, cfg)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	defer p.Close()
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "a-orders", Value: sarama.StringEncoder("v")}); err != nil {
		t.Fatalf("alice to a-orders: %v", err)
	}
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: "a-secret", Value: sarama.StringEncoder("v")})
	if !errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Fatalf("alice to a-secret: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
}

func TestUsersWithKcat(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not on PATH: run scripts/install-clients.sh")
	}
	env := startUsers(t)
	kcat := func(user, stdin string, args ...string) (string, error) {
		props := filepath.Join(t.TempDir(), user+".properties")
		body := fmt.Sprintf("security.protocol=SASL_PLAINTEXT\nsasl.mechanisms=SCRAM-SHA-512\nsasl.username=%s\nsasl.password=%s\n", user, passwords[user])
		if err := os.WriteFile(props, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "kcat", append([]string{"-F", props, "-b", env.addr}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := kcat("bob", "", "-L", "-J")
	if err != nil {
		t.Fatalf("kcat -L as bob: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"a-orders"`) || strings.Contains(out, `"a-secret"`) || strings.Contains(out, `"b-other"`) {
		t.Fatalf("bob's metadata lists other topics:\n%s", out)
	}
	if out, err := kcat("alice", "hello\n", "-P", "-t", "a-orders"); err != nil {
		t.Fatalf("kcat produce as alice: %v\n%s", err, out)
	}
	out, err = kcat("alice", "nope\n", "-P", "-t", "a-secret")
	if err == nil && !strings.Contains(out, "authoriz") {
		t.Fatalf("kcat produce to a-secret as alice succeeded:\n%s", out)
	}
	if !strings.Contains(strings.ToLower(out), "authoriz") {
		t.Fatalf("kcat produce to a-secret: %v, no authorization error in:\n%s", err, out)
	}
}
