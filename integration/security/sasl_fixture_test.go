package security

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"

	"github.com/kproxy/kproxy/proxy/assembly"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/security/audit"
	"github.com/kproxy/kproxy/proxy/security/sasl"
	"github.com/kproxy/kproxy/proxy/security/tlsconf"
	"github.com/kproxy/kproxy/testkit/testrig"
)

// memCreds is a credential store in memory, for tests of the SASL
// exchange alone (the etcd store has tests of its own).
type memCreds struct {
	mu sync.Mutex
	m  map[string]scram.StoredCredentials // mechanism + "/" + user
}

func (c *memCreds) SCRAM(mech, user string) (scram.StoredCredentials, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[mech+"/"+user]
	return v, ok
}

func (c *memCreds) add(t *testing.T, user, password string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]scram.StoredCredentials{}
	}
	for _, mech := range []string{sasl.ScramSHA256, sasl.ScramSHA512} {
		salt := make([]byte, 16)
		rand.Read(salt)
		cred, err := sasl.FromPassword(mech, password, salt, 4096)
		if err != nil {
			t.Fatal(err)
		}
		c.m[mech+"/"+user] = cred
	}
}

// saslEnv is a proxy with SASL_SSL and SASL_PLAINTEXT listeners.
type saslEnv struct {
	p         *assembly.Proxy
	secure    string // SASL_SSL address
	plain     string // SASL_PLAINTEXT address
	tls       *tls.Config
	caPEM     []byte // the server certificate's CA
	reg       *prometheus.Registry
	audit     *testrig.SyncBuffer
	creds     *memCreds
	plaintext string // PLAINTEXT address
}

// startSASL runs the proxy; adjust changes its SASL settings, more its
// whole configuration.
func startSASL(t *testing.T, adjust func(*sasl.Config), more ...func(*assembly.Config)) *saslEnv {
	t.Helper()
	dir := t.TempDir()
	ca := newCA(t, "server CA")
	cert, key, _ := serverFiles(t, dir, ca, nil)
	files, err := tlsconf.New(tlsconf.Config{CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	env := &saslEnv{tls: &tls.Config{RootCAs: ca.Pool()}, caPEM: ca.PEM, audit: &testrig.SyncBuffer{}, creds: &memCreds{}, reg: prometheus.NewRegistry()}
	env.creds.add(t, "alice", "alice-secret")
	sc := &sasl.Config{
		Mechanisms:   []string{sasl.ScramSHA512, sasl.ScramSHA256, sasl.Plain},
		Credentials:  env.creds,
		FailureDelay: 50 * time.Millisecond,
	}
	if adjust != nil {
		adjust(sc)
	}
	c := startCluster(t, 1, func(_ int, cfg *assembly.Config) {
		cfg.Listeners = []listener.Listener{
			{Name: "SASL_SSL", Protocol: listener.SASLSSL, Addr: "127.0.0.1:0", TLSFiles: files},
			{Name: "SASL_PLAINTEXT", Protocol: listener.SASLPlaintext, Addr: "127.0.0.1:0"},
			{Name: "PLAINTEXT", Protocol: listener.Plaintext, Addr: "127.0.0.1:0"},
		}
		cfg.Security.SASL = sc
		cfg.Security.HandshakeTimeout = 5 * time.Second
		cfg.Security.Audit = audit.New(env.audit)
		cfg.Registry = env.reg
		for _, m := range more {
			m(cfg)
		}
	})
	env.p = c.Proxy(0)
	env.secure, env.plain, env.plaintext = env.p.ListenerAddr("SASL_SSL"), env.p.ListenerAddr("SASL_PLAINTEXT"), env.p.ListenerAddr("PLAINTEXT")
	return env
}

// rawConn speaks Kafka frames on a plain TCP connection.
type rawConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// send writes req with a v1 (or flexible v2) request header.
func (r *rawConn) send(req kmsg.Request) {
	r.t.Helper()
	r.corr++
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(r.corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatalf("write %s: %v", kmsg.NameForKey(req.Key()), err)
	}
}

// read reads one frame (with a 5s bound); it returns nil when the proxy
// closed the connection.
func (r *rawConn) read() []byte {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := ioReadFull(r.c, size[:]); err != nil {
		if isTimeout(err) {
			r.t.Fatal("no answer and no close within 5s")
		}
		return nil
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := ioReadFull(r.c, b); err != nil {
		r.t.Fatalf("read frame: %v", err)
	}
	return b
}

// response decodes a response to req (header v0, or v1 when flexible).
func (r *rawConn) response(req kmsg.Request) kmsg.Response {
	r.t.Helper()
	b := r.read()
	if b == nil {
		r.t.Fatalf("connection closed instead of a %s answer", kmsg.NameForKey(req.Key()))
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	off := 4
	if req.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		off = 5
	}
	if err := resp.ReadFrom(b[off:]); err != nil {
		r.t.Fatalf("decode %s answer: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// closed reports whether the proxy closed the connection (within 5s).
func (r *rawConn) closed() bool { return r.read() == nil }

// counter is the value of a counter with the given labels (0 if absent).
func (e *saslEnv) counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
