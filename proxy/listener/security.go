package listener

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/kproxy/kproxy/internal/promreg"
	"github.com/kproxy/kproxy/proxy/security/audit"
	"github.com/kproxy/kproxy/proxy/security/credstore"
	"github.com/kproxy/kproxy/proxy/security/principal"
	"github.com/kproxy/kproxy/proxy/security/sasl"
	"github.com/kproxy/kproxy/proxy/security/tlsconf"
)

// Security configures how clients prove who they are on the listeners.
type Security struct {
	// SASL configures the SASL_PLAINTEXT and SASL_SSL listeners (required
	// when there is one). When its Credentials are nil, the SCRAM
	// credentials in etcd under the layout's prefix are used.
	SASL *sasl.Config
	// PrincipalMapper maps client certificates on SSL listeners to
	// principals (nil: Kafka's DEFAULT, the whole subject).
	PrincipalMapper *tlsconf.Mapper
	// HandshakeTimeout bounds the TLS handshake and, on SASL listeners,
	// the time until the client has authenticated (default 10s).
	HandshakeTimeout time.Duration
	// SuperUsers may manage SCRAM credentials through the Kafka API. When
	// empty, anyone may (Kafka without an authorizer).
	SuperUsers []principal.Principal
	// Runners are run (and stopped) with the server: JWKS refreshes,
	// certificate reloads of files not tied to a listener.
	Runners []func(ctx context.Context) error
	// Audit receives security events (nil: none).
	Audit *audit.Log
}

// Auth is the authentication state every connection shares; New builds
// it and Run runs its background work.
type Auth struct {
	auth    *sasl.Authenticator // nil without SASL listeners
	mapper  *tlsconf.Mapper
	timeout time.Duration
	audit   *audit.Log
	m       *securityMetrics
	runners []func(ctx context.Context) error
	// credsReady is closed once the credentials from etcd are loaded; nil
	// when SASL checks credentials from elsewhere.
	credsReady <-chan struct{}
	// logs bounds the Info lines refusals write (each is also counted in
	// a metric and, if configured, audited): a client retrying a bad
	// password in a loop must not flood the log.
	logs *rate.Limiter
}

// maxUnauthenticatedFrame is Kafka's sasl.server.max.receive.size.
const maxUnauthenticatedFrame = 512 << 10

// New builds the authentication state of listeners ls: SASL checks the
// credentials of cfg.SASL or, when it names none, those in store (and a
// SASL connection waits until store has loaded them). store's Run is
// among what Run runs.
func New(cfg Security, ls []Listener, store *credstore.Store, reg prometheus.Registerer, log *slog.Logger) (*Auth, error) {
	sec := &Auth{
		mapper: cfg.PrincipalMapper, timeout: cfg.HandshakeTimeout,
		audit: cfg.Audit, m: newSecurityMetrics(reg),
		runners: slices.Clone(cfg.Runners),
		logs:    rate.NewLimiter(rate.Limit(5), 20),
	}
	if sec.timeout <= 0 {
		sec.timeout = 10 * time.Second
	}
	if sec.mapper == nil {
		sec.mapper, _ = tlsconf.ParseRules("DEFAULT")
	}
	needSASL := false
	for _, l := range ls {
		needSASL = needSASL || l.Protocol.SASL()
		if l.TLSFiles != nil {
			sec.runners = append(sec.runners, l.TLSFiles.Run)
		}
	}
	// Every replica keeps a view of the SCRAM credentials in etcd: SASL
	// checks them and the Kafka API manages them (users.go).
	sec.runners = append(sec.runners, store.Run)
	if cfg.SASL != nil && needSASL {
		sc := *cfg.SASL
		if sc.Credentials == nil {
			sc.Credentials = store
			sec.credsReady = store.Synced()
		}
		auth, err := sasl.New(sc)
		if err != nil {
			return nil, fmt.Errorf("proxy: %w", err)
		}
		sec.auth = auth
	} else if needSASL {
		return nil, errors.New("proxy: SASL listeners need SASL settings")
	}
	if needSASL && len(cfg.SuperUsers) == 0 {
		log.Warn("no super users configured: any client may manage SCRAM credentials through the Kafka API, as on a Kafka broker without an authorizer")
	}
	return sec, nil
}

// Run runs the security background work (credential view, JWKS
// refreshes, certificate reloads) until ctx ends.
func (s *Auth) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errc := make(chan error, len(s.runners))
	for _, r := range s.runners {
		wg.Go(func() {
			if err := r(ctx); err != nil && ctx.Err() == nil {
				errc <- err
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}

type securityMetrics struct {
	auths    *prometheus.CounterVec
	accepted *prometheus.CounterVec
	rejected *prometheus.CounterVec
}

// Values of the reason label of kproxy_connections_rejected_total.
const (
	rejectTLSHandshake = "tls_handshake"
	rejectNoPrincipal  = "no_principal"
	rejectAuthFailed   = "authentication_failed"
	rejectAuthTimeout  = "authentication_timeout"
	rejectBeforeAuth   = "request_before_authentication"
	rejectSASLProtocol = "sasl_protocol"
	rejectExpired      = "session_expired"
)

func newSecurityMetrics(reg prometheus.Registerer) *securityMetrics {
	m := &securityMetrics{
		auths: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_authentications_total", Help: "SASL authentications and re-authentications, by mechanism and outcome (success, failure).",
		}, []string{"mechanism", "outcome"}),
		accepted: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_listener_connections_total", Help: "Client connections accepted, by listener.",
		}, []string{"listener"}),
		rejected: promreg.CounterVec(reg, prometheus.CounterOpts{
			Name: "kproxy_connections_rejected_total", Help: "Client connections closed by the security checks, by reason.",
		}, []string{"reason"}),
	}
	return m
}

// MayManageUsers says whether p may describe and alter SCRAM credentials.
func (s *Security) MayManageUsers(p principal.Principal) bool {
	return len(s.SuperUsers) == 0 || slices.Contains(s.SuperUsers, p)
}
