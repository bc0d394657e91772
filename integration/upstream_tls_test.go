package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kproxy/kproxy/internal/devcert"
	"github.com/kproxy/kproxy/internal/etcdlocal/etcdtest"
	"github.com/kproxy/kproxy/internal/tlsreload"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/admin/adminapi"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/refbroker/broker"
	"github.com/kproxy/kproxy/refbroker/store"
)

// TestUpstreamTLS runs stub brokers that listen on TLS only and proxies
// that reach them over TLS: one trusting the brokers' CA serves a producer
// and a consumer; one trusting another CA cannot reach them.
func TestUpstreamTLS(t *testing.T) {
	ca, err := devcert.NewCA("brokers CA")
	if err != nil {
		t.Fatal(err)
	}
	other, err := devcert.NewCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pkix.Name{CommonName: "broker"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	etcd, cli := etcdtest.Start(t)
	lay := layout.New("")
	st := store.NewMemory()
	for id := int32(1); id <= 2; id++ {
		b, err := broker.New(context.Background(), broker.Config{
			ID: id, Etcd: etcdtest.NewClient(t, etcd.Endpoint), Layout: lay, Store: st, LeaseTTL: 5 * time.Second,
			AutoCreateTopics: true, DefaultPartitions: 4,
			TLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}},
		})
		if err != nil {
			t.Fatal(err)
		}
		runUntilCleanup(t, fmt.Sprint("broker ", id), b.Run)
	}
	startProxy := func(caPEM []byte) *assembly.Proxy {
		t.Helper()
		caFile := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		rc, err := tlsreload.New(tlsreload.Files{CAFile: caFile}, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := assembly.New(context.Background(), assembly.Config{
			Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", Etcd: cli, Layout: lay,
			AutoCreateTopics: true, DefaultPartitions: 4, UpstreamTLS: rc.Config, Registry: prometheus.NewRegistry(),
		})
		if err != nil {
			t.Fatal(err)
		}
		runUntilCleanup(t, "proxy", s.Run)
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := adminapi.WaitReady(rctx, s.AdminAddr(), 2); err != nil {
			t.Fatal(err)
		}
		return s
	}

	good := startProxy(ca.PEM)
	const topic, n = "over-tls", 40
	cl := newClient(t, good.Addr(), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var produced []record
	for i := range n {
		r := &kgo.Record{Value: []byte(fmt.Sprint("v", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d through TLS to brokers: %v", i, err)
		}
		produced = append(produced, record{r.Partition, r.Offset, string(r.Value)})
	}
	checkSame(t, produced, consumeAll(t, good.Addr(), topic, n, 30*time.Second))

	bad := startProxy(other.PEM)
	badCl := newClient(t, bad.Addr(), kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(3*time.Second))
	bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer bcancel()
	if err := badCl.ProduceSync(bctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("a proxy trusting another CA reached the brokers")
	}
}

// runUntilCleanup runs run until the test ends, then cancels it and waits.
func runUntilCleanup(t *testing.T, what string, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop within 30s", what)
		}
	})
}
