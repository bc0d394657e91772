// Package listener is the proxy's listener security: Kafka-style listeners
// (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) bound and advertised, and each
// client connection's TLS handshake, principal and SASL gate (Gate) before
// its requests reach the dispatcher. It also serves the SCRAM credential
// APIs from the etcd store (users.go).
//
// Its limit: it decides who a connection is and whether it may send a
// request yet; what a principal may do is package authz's, and the
// connection itself (frames, order, backpressure) is package proxy's.
package listener

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/kproxy/kproxy/internal/commalist"
	"github.com/kproxy/kproxy/proxy/proxyproto"
	"github.com/kproxy/kproxy/proxy/security/tlsconf"
)

// Protocol is a Kafka listener security protocol.
type Protocol string

// The security protocols of Kafka's listeners.
const (
	Plaintext     Protocol = "PLAINTEXT"
	SSL           Protocol = "SSL"
	SASLPlaintext Protocol = "SASL_PLAINTEXT"
	SASLSSL       Protocol = "SASL_SSL"
)

// TLS reports whether the protocol runs over TLS.
func (p Protocol) TLS() bool { return p == SSL || p == SASLSSL }

// SASL reports whether clients must authenticate with SASL.
func (p Protocol) SASL() bool { return p == SASLPlaintext || p == SASLSSL }

func parseProtocol(s string) (Protocol, bool) {
	switch p := Protocol(strings.ToUpper(s)); p {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
		return p, true
	}
	return "", false
}

// Listener is one address the proxy accepts Kafka clients on, as Kafka's
// `listeners` entries are: a name, a security protocol, the address to bind
// and the address clients are told to use.
type Listener struct {
	Name     string
	Protocol Protocol
	Addr     string // host:port to bind
	// Advertise is the host:port Metadata and FindCoordinator give clients
	// that came in on this listener (default: the bound address).
	Advertise string
	// TLS serves the TLS listeners (SSL, SASL_SSL); required for them.
	// TLSFiles, if set, is the reloading source of TLS (its reloads run
	// with the server).
	TLS      *tls.Config
	TLSFiles *tlsconf.Server
	// ProxyProtocol, if on, names the load balancers whose connections
	// start with a PROXY header (before TLS, on TLS listeners); package
	// proxy reads it at accept.
	ProxyProtocol proxyproto.Policy
}

// ParseListeners reads Kafka's `listeners`, `advertised.listeners` and
// `listener.security.protocol.map` settings: comma-separated NAME://HOST:PORT
// entries, where NAME is a security protocol or a name the map gives one
// (NAME:PROTOCOL pairs). Every advertised name must be a listener; a
// listener without one advertises its bound address.
func ParseListeners(listeners, advertised, protocolMap string) ([]Listener, error) {
	protos := map[string]Protocol{}
	for _, pair := range commalist.Split(protocolMap) {
		name, proto, ok := strings.Cut(pair, ":")
		p, known := parseProtocol(proto)
		if !ok || !known || name == "" {
			return nil, fmt.Errorf("listener security protocol map entry %q: want NAME:PROTOCOL with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", pair)
		}
		protos[strings.ToUpper(name)] = p
	}
	var out []Listener
	seen := map[string]int{}
	for _, e := range commalist.Split(listeners) {
		name, addr, err := parseEndpoint(e)
		if err != nil {
			return nil, fmt.Errorf("listener %q: %w", e, err)
		}
		p, ok := protos[name]
		if !ok {
			if p, ok = parseProtocol(name); !ok {
				return nil, fmt.Errorf("listener %q: %s is neither a security protocol nor in the listener security protocol map", e, name)
			}
		}
		if _, dup := seen[name]; dup {
			return nil, fmt.Errorf("listener %q: name %s used twice", e, name)
		}
		seen[name] = len(out)
		out = append(out, Listener{Name: name, Protocol: p, Addr: addr})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no listeners in %q", listeners)
	}
	for _, e := range commalist.Split(advertised) {
		name, addr, err := parseEndpoint(e)
		if err != nil {
			return nil, fmt.Errorf("advertised listener %q: %w", e, err)
		}
		i, ok := seen[name]
		if !ok {
			return nil, fmt.Errorf("advertised listener %q: no listener named %s", e, name)
		}
		if host, _, _ := net.SplitHostPort(addr); host == "" {
			return nil, fmt.Errorf("advertised listener %q: needs a host", e)
		}
		out[i].Advertise = addr
	}
	return out, nil
}

// parseEndpoint splits NAME://HOST:PORT.
func parseEndpoint(e string) (name, addr string, err error) {
	name, addr, ok := strings.Cut(e, "://")
	if !ok || name == "" {
		return "", "", fmt.Errorf("want NAME://HOST:PORT")
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", "", fmt.Errorf("port %q: %w", port, err)
	}
	return strings.ToUpper(name), addr, nil
}
