package assembly

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/leasewatch"
	"github.com/kproxy/kproxy/leasewatch/kafscale"
	"github.com/kproxy/kproxy/routing"
)

// TestNewSourceByLayout: each layout gets its source, only KafScale's
// table routes owner-only, and an unknown layout is refused.
func TestNewSourceByLayout(t *testing.T) {
	// Sources connect only in Run: an unconnected client is enough here.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:1"}, DialTimeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cases := []struct {
		layout    string
		wantErr   bool
		ownerOnly bool
		check     func(routingSource) bool
	}{
		{"", false, false, func(s routingSource) bool { _, ok := s.(*leasewatch.Watcher); return ok }},
		{LayoutKproxy, false, false, func(s routingSource) bool { _, ok := s.(*leasewatch.Watcher); return ok }},
		{LayoutKafScale, false, true, func(s routingSource) bool { _, ok := s.(*kafscale.Source); return ok }},
		{"kafka", true, false, nil},
	}
	for _, c := range cases {
		routes := routing.NewTable()
		cfg := Config{Etcd: cli, EtcdLayout: c.layout, Logger: slog.New(slog.DiscardHandler), Registry: prometheus.NewRegistry()}
		src, err := newSource(cfg, routes)
		if c.wantErr {
			if err == nil || !strings.Contains(err.Error(), c.layout) {
				t.Errorf("layout %q: err = %v, want one naming the layout", c.layout, err)
			}
			continue
		}
		if err != nil || !c.check(src) {
			t.Errorf("layout %q: source %T, err %v", c.layout, src, err)
		}
		if routes.OwnerOnly() != c.ownerOnly {
			t.Errorf("layout %q: owner-only = %v, want %v", c.layout, routes.OwnerOnly(), c.ownerOnly)
		}
	}
}

// TestSetFetchFrom: zone reads are the default for kproxy's layout, off for
// KafScale's (whose non-owners serve stale copies), and asking for them
// there is an error.
func TestSetFetchFrom(t *testing.T) {
	cases := []struct {
		layout, from string
		want, err    bool
	}{
		{LayoutKproxy, "", true, false},
		{"", FetchOwner, false, false},
		{LayoutKproxy, FetchZone, true, false},
		{LayoutKafScale, "", false, false},
		{LayoutKafScale, FetchOwner, false, false},
		{LayoutKafScale, FetchZone, false, true},
		{LayoutKproxy, "nearest", false, true},
	}
	if err := setFetchFrom(Config{EtcdLayout: LayoutKafScale, AcquireInZone: true}, routing.NewTable()); err == nil {
		t.Error("acquire-in-zone accepted with KafScale's layout")
	}
	for _, c := range cases {
		routes := routing.NewTable()
		err := setFetchFrom(Config{EtcdLayout: c.layout, FetchFrom: c.from}, routes)
		if (err != nil) != c.err || (err == nil && routes.ZoneReads() != c.want) {
			t.Errorf("layout %q fetch-from %q: zone reads %v, err %v; want %v, error %v", c.layout, c.from, routes.ZoneReads(), err, c.want, c.err)
		}
	}
}
