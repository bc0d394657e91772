// Package etcdlocal runs a real etcd server in this process, on 127.0.0.1,
// for `kproxy dev` and for tests. It is the real server (go.etcd.io/etcd/server
// embed), not a fake: transactions, leases and watches behave as in production.
package etcdlocal

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// Config says where the server keeps its data and listens.
type Config struct {
	// Dir is the data directory. Empty means a new temporary directory that
	// Close removes.
	Dir string
	// ClientAddr is host:port for clients; empty means 127.0.0.1 on a free port.
	ClientAddr string
	// LogLevel is etcd's own (zap) log level; empty means "fatal", because a
	// normal Close logs listener errors with stack traces at "error" level.
	LogLevel string
	// UnsafeNoFsync trades durability for speed (tests only); it also
	// hashes passwords of etcd users at bcrypt's lowest cost.
	UnsafeNoFsync bool
	// TLS, if set, serves clients over TLS (an https endpoint).
	TLS *TLS
}

// TLS is the server side of client TLS: the server's certificate and key
// and, if ClientCAFile is set, the CAs a client certificate must chain to
// (then every client must present one).
type TLS struct {
	CertFile, KeyFile, ClientCAFile string
}

func (c Config) withDefaults() Config {
	if c.ClientAddr == "" {
		c.ClientAddr = "127.0.0.1:0"
	}
	if c.LogLevel == "" {
		c.LogLevel = "fatal"
	}
	return c
}

// Server is a running embedded etcd.
type Server struct {
	etcd    *embed.Etcd
	tempDir string
	// Endpoint is the client URL, e.g. http://127.0.0.1:43210 (https with TLS).
	Endpoint string
	// Dir is the data directory in use.
	Dir string
}

// Start starts the server and waits until it serves clients or ctx ends.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	s := &Server{}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "kproxy-etcd-")
		if err != nil {
			return nil, fmt.Errorf("etcd data dir: %w", err)
		}
		dir, s.tempDir = d, d
	}
	s.Dir = dir
	ec := embed.NewConfig()
	ec.Name = "kproxy-dev"
	ec.Dir = dir
	ec.LogLevel = cfg.LogLevel
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	if cfg.UnsafeNoFsync {
		ec.BcryptCost = 4 // bcrypt.MinCost: each authentication costs ~1ms, not ~100ms (seconds under -race)
	}
	// Every commit rewrites a partition's state key; without compaction the
	// history grows until etcd refuses writes (database space exceeded).
	// Watchers that fall further behind re-list (leasewatch handles it).
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = "1m"
	scheme := "http"
	if t := cfg.TLS; t != nil {
		scheme = "https"
		ec.ClientTLSInfo = transport.TLSInfo{
			CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.ClientCAFile, ClientCertAuth: t.ClientCAFile != "",
		}
	}
	// One member: nobody dials the peer listener, so port 0 serves (also
	// across restarts on the same data, which store the same URL).
	cu, pu := mustURL(scheme+"://"+cfg.ClientAddr), mustURL("http://127.0.0.1:0")
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	ec.InitialCluster = ec.Name + "=" + pu.String()
	e, err := embed.StartEtcd(ec)
	if err != nil {
		s.removeTemp()
		return nil, fmt.Errorf("start embedded etcd in %s: %w", dir, err)
	}
	s.etcd = e
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		s.Close()
		return nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-ctx.Done():
		s.Close()
		return nil, fmt.Errorf("embedded etcd not ready: %w", ctx.Err())
	case <-time.After(60 * time.Second):
		s.Close()
		return nil, fmt.Errorf("embedded etcd not ready after 60s")
	}
	s.Endpoint = scheme + "://" + e.Clients[0].Addr().String()
	return s, nil
}

// Close stops the server and removes a temporary data directory.
func (s *Server) Close() {
	if s.etcd != nil {
		s.etcd.Close()
	}
	s.removeTemp()
}

func (s *Server) removeTemp() {
	if s.tempDir != "" {
		os.RemoveAll(s.tempDir)
	}
}

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err) // only built from host:port strings above
	}
	return *u
}
