// Stack: `kproxy etcd` as a process and a Cluster of brokers and proxies on
// it, the set-up the soak and the scale runs share.

package testrig

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// StackConfig says what a Stack runs. Cluster's Kproxy, LogDir, Etcd and
// EtcdEndpoints are filled in; its Store defaults to "memory" (each broker
// its own, so no broker reads another's segments).
type StackConfig struct {
	Kproxy string // the kproxy binary (Build)
	LogDir string // every process's log, and etcd's data unless EtcdDataDir
	// EtcdDataDir is etcd's --data-dir; "": a tmpfs folder when /dev/shm
	// exists (etcd's fsync on a shared disk would measure the disk), removed
	// by Close, else LogDir/etcd-data.
	EtcdDataDir      string
	Cluster          ClusterConfig
	Brokers, Proxies int
	// BrokerFlags and ProxyFlags, if set, give one broker's (by id, from 1)
	// and one proxy's (by index, from 0) own flags.
	BrokerFlags func(id int32) []string
	ProxyFlags  func(i int) []string
}

// Stack is a running etcd process with brokers and proxies on it.
type Stack struct {
	Etcd     *Proc
	Endpoint string // etcd's client URL
	Client   *clientv3.Client
	Cluster  *Cluster
	tmpData  string // etcd's data folder Close removes; "" for none
}

// etcdStartTimeout bounds etcd's start: it is ready in about a second.
const etcdStartTimeout = 60 * time.Second

// StartStack starts etcd, then cfg.Brokers brokers (ids 1 up) and
// cfg.Proxies proxies, and returns once each is ready; on an error
// everything it started is stopped again.
func StartStack(ctx context.Context, cfg StackConfig) (s *Stack, err error) {
	s = &Stack{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("log folder: %w", err)
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	data := cfg.EtcdDataDir
	if data == "" {
		if s.tmpData, err = os.MkdirTemp("/dev/shm", "kproxy-etcd-"); err == nil {
			data = s.tmpData
		} else {
			data = filepath.Join(cfg.LogDir, "etcd-data")
		}
	}
	s.Etcd = NewProc(Spec{Name: "etcd", Path: cfg.Kproxy, LogPath: filepath.Join(cfg.LogDir, "etcd.log"),
		Args: []string{"etcd", "--listen-client", addr, "--data-dir", data}, Ready: "serving clients"})
	sctx, cancel := context.WithTimeout(ctx, etcdStartTimeout)
	defer cancel()
	if err := s.Etcd.Start(sctx); err != nil {
		return nil, err
	}
	s.Endpoint = "http://" + addr
	if s.Client, err = clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second}); err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	cc := cfg.Cluster
	cc.Kproxy, cc.LogDir, cc.Etcd, cc.EtcdEndpoints = cfg.Kproxy, cfg.LogDir, s.Client, []string{s.Endpoint}
	cc.Store = cmp.Or(cc.Store, "memory")
	if s.Cluster, err = NewCluster(cc); err != nil {
		return nil, err
	}
	if err := s.add(cfg); err != nil {
		return nil, err
	}
	if err := s.Cluster.StartAll(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// add adds cfg's brokers and proxies to the cluster.
func (s *Stack) add(cfg StackConfig) error {
	for id := int32(1); id <= int32(cfg.Brokers); id++ {
		var extra []string
		if cfg.BrokerFlags != nil {
			extra = cfg.BrokerFlags(id)
		}
		if _, err := s.Cluster.AddBrokerWith(id, nil, extra...); err != nil {
			return err
		}
	}
	for i := range cfg.Proxies {
		var extra []string
		if cfg.ProxyFlags != nil {
			extra = cfg.ProxyFlags(i)
		}
		if _, err := s.Cluster.AddProxy(extra...); err != nil {
			return err
		}
	}
	return nil
}

// Close stops every process, the brokers and proxies first, and removes
// a tmpfs data folder of etcd's.
func (s *Stack) Close() {
	if s.Cluster != nil {
		_ = s.Cluster.Close(15 * time.Second)
	}
	if s.Client != nil {
		s.Client.Close()
	}
	if s.Etcd != nil {
		_ = s.Etcd.Stop(15 * time.Second)
	}
	if s.tmpData != "" {
		os.RemoveAll(s.tmpData)
	}
}
