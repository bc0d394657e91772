package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kproxy/kproxy/assembly/devcluster"
	"github.com/kproxy/kproxy/internal/devcert"
	"github.com/kproxy/kproxy/layout"
	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/security/aclstore"
	"github.com/kproxy/kproxy/proxy/security/authz"
	"github.com/kproxy/kproxy/proxy/security/credstore"
	"github.com/kproxy/kproxy/proxy/security/principal"
	"github.com/kproxy/kproxy/proxy/security/sasl"
	"github.com/kproxy/kproxy/proxy/security/tlsconf"
)

// devSecure is what `kproxy dev --secure` adds: a SASL_SSL listener with a
// certificate from a throwaway CA, and an administrator with a random
// password, described in a librdkafka client.properties.
type devSecure struct {
	dir      string // where ca.pem and client.properties are
	cleanup  func()
	listen   string
	password string
	files    *tlsconf.Server
}

const devAdmin = "admin"

// newDevSecure writes the CA and the server certificate into dataDir (a
// temporary folder, removed by cleanup, when empty).
func newDevSecure(dataDir, listen string) (*devSecure, error) {
	d := &devSecure{listen: listen, cleanup: func() {}}
	if dataDir == "" {
		tmp, err := os.MkdirTemp("", "kproxy-dev-secure-")
		if err != nil {
			return nil, fmt.Errorf("--secure: %w", err)
		}
		d.dir, d.cleanup = tmp, func() { os.RemoveAll(tmp) }
	} else {
		d.dir = dataDir
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("--secure: %w", err)
		}
	}
	_, files, err := devcert.WriteServerFiles(d.dir, "kproxy dev", "127.0.0.1", "localhost", "::1")
	if err != nil {
		d.cleanup()
		return nil, err
	}
	pw := make([]byte, 18)
	rand.Read(pw) // never fails (Go 1.24+)
	d.password = base64.RawURLEncoding.EncodeToString(pw)
	if err := os.WriteFile(filepath.Join(d.dir, "client.properties"), d.properties(), 0o600); err != nil {
		d.cleanup()
		return nil, fmt.Errorf("--secure: %w", err)
	}
	d.files, err = tlsconf.New(tlsconf.Config{CertFile: files.Cert, KeyFile: files.Key})
	if err != nil {
		d.cleanup()
		return nil, err
	}
	return d, nil
}

func (d *devSecure) properties() []byte {
	return fmt.Appendf(nil, "security.protocol=SASL_SSL\nsasl.mechanisms=SCRAM-SHA-512\nsasl.username=%s\nsasl.password=%s\nssl.ca.location=%s\n",
		devAdmin, d.password, filepath.Join(d.dir, "ca.pem"))
}

// configure adds the SASL_SSL listener next to the plaintext one.
func (d *devSecure) configure(_ int, cfg *assembly.Config) {
	cfg.Listeners = []listener.Listener{
		{Name: string(listener.Plaintext), Protocol: listener.Plaintext, Addr: cfg.Listen},
		{Name: string(listener.SASLSSL), Protocol: listener.SASLSSL, Addr: d.listen, TLSFiles: d.files},
	}
	cfg.Security.SASL = &sasl.Config{Mechanisms: []string{sasl.ScramSHA512, sasl.ScramSHA256, sasl.Plain}}
	cfg.Security.SuperUsers = []principal.Principal{principal.User(devAdmin)}
	// Every listener enforces ACLs, deny by default: an open plaintext
	// listener would administer the secure one (ACLs, quotas, topics).
	// Its clients (User:ANONYMOUS) get anonymousBindings.
	cfg.Authz = authz.Config{Mode: authz.DenyByDefault, SuperUsers: []string{principal.User(devAdmin).String()}}
}

// devAnonymousGroupPrefix names the consumer groups the plaintext
// listener's clients may use.
const devAnonymousGroupPrefix = "anonymous-"

// anonymousBindings let the plaintext listener's clients produce and
// consume, as `make run` has them, and nothing else: no ACLs, quotas,
// topic creation or deletion, configs or users. Their consumer groups are
// those named devAnonymousGroupPrefix*: Read on every group would let them
// join, and rewrite the committed offsets of, any SASL user's group.
func anonymousBindings() []authz.Binding {
	allow := func(rt kmsg.ACLResourceType, pt kmsg.ACLResourcePatternType, name string, op kmsg.ACLOperation) authz.Binding {
		return authz.Binding{
			Pattern: authz.Pattern{Type: rt, PatternType: pt, Name: name},
			Entry:   authz.Entry{Principal: principal.Anonymous.String(), Host: authz.Wildcard, Operation: op, Permission: kmsg.ACLPermissionTypeAllow},
		}
	}
	const literal, prefixed = kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	return []authz.Binding{
		allow(kmsg.ACLResourceTypeTopic, literal, authz.Wildcard, kmsg.ACLOperationWrite),
		allow(kmsg.ACLResourceTypeTopic, literal, authz.Wildcard, kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeGroup, prefixed, devAnonymousGroupPrefix, kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTransactionalId, literal, authz.Wildcard, kmsg.ACLOperationWrite),
	}
}

// addAnonymous stores anonymousBindings in etcd (visible and removable
// with kproxy acls; written again at each start), and removes the Read on
// every group that earlier versions gave, from a data dir they used. It
// returns the revision that holds the bindings.
func (d *devSecure) addAnonymous(ctx context.Context, cli *clientv3.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	anon, any := principal.Anonymous.String(), authz.Wildcard
	everyGroup := authz.Filter{Type: kmsg.ACLResourceTypeGroup, PatternType: kmsg.ACLResourcePatternTypeLiteral, Name: &any,
		Principal: &anon, Host: &any, Operation: kmsg.ACLOperationRead, Permission: kmsg.ACLPermissionTypeAllow}
	if _, _, err := aclstore.Delete(ctx, cli, layout.New(""), []authz.Filter{everyGroup}); err != nil {
		return 0, fmt.Errorf("--secure: remove %s's Read on every group: %w", principal.Anonymous, err)
	}
	// Create's puts come after the delete, so its revision covers both.
	rev, err := aclstore.Create(ctx, cli, layout.New(""), anonymousBindings())
	if err != nil {
		return 0, fmt.Errorf("--secure: bindings for %s: %w", principal.Anonymous, err)
	}
	return rev, nil
}

// start writes the administrator and the anonymous bindings, then waits
// until every proxy enforces them: dev prints the login only once it works
// (a restart on the same data dir writes a new password, which the proxies
// learn through their watch).
func (d *devSecure) start(ctx context.Context, cl *devcluster.Cluster) error {
	credRev, err := d.addAdmin(ctx, cl.Client())
	if err != nil {
		return err
	}
	aclRev, err := d.addAnonymous(ctx, cl.Client())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := range cl.ProxyAddrs() {
		if err := cl.Proxy(i).WaitSecurity(ctx, credRev, aclRev); err != nil {
			return fmt.Errorf("--secure: proxy %d: %w", i, err)
		}
	}
	return nil
}

// addAdmin stores the administrator's credentials in etcd and returns the
// revision that holds them.
func (d *devSecure) addAdmin(ctx context.Context, cli *clientv3.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return credstore.PutPassword(ctx, cli, layout.New(""), devAdmin, d.password, credstore.Mechanisms, credstore.DefaultIterations)
}
