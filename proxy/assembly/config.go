package assembly

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/sasl"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy"
	"github.com/kproxy/kproxy/proxy/apis/recordcheck"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/quota"
	"github.com/kproxy/kproxy/proxy/security/adminauth"
	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/proxy/zone"
)

// Config configures a whole proxy. Zero values take the documented
// defaults.
type Config struct {
	Listen string // Kafka listener, host:port (a PLAINTEXT listener when Listeners is empty)
	// Listeners, if set, replace Listen and Advertise: each is bound and
	// advertised to the clients that come in on it (package listener).
	Listeners []listener.Listener
	// Security configures authentication on the listeners (package
	// listener).
	Security    listener.Security
	AdminListen string // admin HTTP listener, host:port
	// Advertise is the host:port clients see, the same on every replica
	// (default: the bound Kafka listener address).
	Advertise string
	NodeID    int32 // broker id clients see (default 0)
	ClusterID string
	Etcd      *clientv3.Client
	Layout    layout.Layout // its Prefix is the root of the keys EtcdLayout reads
	// EtcdLayout says whose keys route: LayoutKproxy (default) or
	// LayoutKafScale.
	EtcdLayout string

	AutoCreateTopics  bool
	DefaultPartitions int32

	// Zone is the proxy's own availability zone, the last guess at a
	// client's zone; ZoneRanges map client addresses to zones (package
	// zone gives the order). FetchFrom is where fetches go: FetchZone
	// (a broker of the client's zone) or FetchOwner; "" is FetchZone for
	// kproxy's layout and FetchOwner for KafScale's, whose brokers serve
	// stale copies of partitions they do not own (FetchZone is refused
	// there).
	Zone       string
	ZoneRanges []zone.Range
	FetchFrom  string
	// AcquireInZone sends the first produce to a partition without a live
	// owner to a broker of the producer's zone (routing.RouteWrite), so its
	// lease lands near the producer. Refused with KafScale's layout.
	AcquireInZone bool

	// Server configures the client connections: frame sizes, requests in
	// flight, drain and write timeouts, limits (New sets its Logger and
	// Registry).
	Server proxy.Config

	// ProduceValidation is how much of each Produce partition's record
	// data is checked by Kafka's broker rules before it is forwarded
	// (default recordcheck.Full: framing, header fields and CRC-32C); a
	// refused partition is answered with Kafka's code, the others proceed.
	ProduceValidation recordcheck.Level
	// EncryptionFile, if set, is the record encryption configuration
	// (package crypt, docs/encryption.md), reloaded when it changes.
	EncryptionFile string

	// Quota sets the client quota windows (Kafka's defaults); New sets its
	// Now and Registerer.
	Quota quota.Config
	// Authz configures authorization (zero: mode allow-all, everything is
	// permitted). The bindings come from etcd under Layout.ACLPrefix in
	// every mode, so they can be managed before enforcement is turned on.
	Authz authz.Config
	// Audit, if set, receives every authorization denial and one in
	// AuditAllowsEvery allows (0: none); unset, they go to Security.Audit.
	Audit            func(authz.Event)
	AuditAllowsEvery uint64

	Admin adminauth.Config // TLS and credentials of the admin endpoint

	UpstreamConnsPerBroker int // default 4
	// UpstreamMaxConns and UpstreamIdleTimeout bound the on-demand
	// connections to brokers that answer in order (defaults 256 and 60s,
	// upstream.Config's MaxConnsPerBroker and IdleTimeout).
	UpstreamMaxConns    int
	UpstreamIdleTimeout time.Duration
	// UpstreamTLS, if set, gives the TLS configuration of each new broker
	// connection (tlsreload.Client.Config reloads its files); UpstreamSASL,
	// if set, authenticates each one (franz-go's pkg/sasl).
	UpstreamTLS  func(host string) *tls.Config
	UpstreamSASL sasl.Mechanism
	EnablePprof  bool
	Logger       *slog.Logger
	Registry     *prometheus.Registry // default: a new registry
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	c.Server.Logger, c.Server.Registry = c.Logger, c.Registry
}

// setListeners turns Listen and Advertise into the one PLAINTEXT listener
// when no Listeners are configured, and checks the ones that are.
func (c *Config) setListeners() error {
	if len(c.Listeners) == 0 {
		c.Listeners = []listener.Listener{{Name: string(listener.Plaintext), Protocol: listener.Plaintext, Addr: c.Listen, Advertise: c.Advertise}}
	}
	return listener.Check(c.Listeners, c.Security.SASL != nil)
}
