package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
)

// boundListener is a Listener with its socket and advertised address.
type boundListener struct {
	Listener
	ln   net.Listener
	host string // advertised
	port int32
}

func (b *boundListener) advertise() string {
	return net.JoinHostPort(b.host, strconv.Itoa(int(b.port)))
}

// setListeners turns Listen and Advertise into the one PLAINTEXT listener
// when no Listeners are configured, and checks the ones that are.
func (c *Config) setListeners() error {
	if len(c.Listeners) == 0 {
		c.Listeners = []Listener{{Name: string(Plaintext), Protocol: Plaintext, Addr: c.Listen, Advertise: c.Advertise}}
	}
	names := map[string]bool{}
	for i := range c.Listeners {
		l := &c.Listeners[i]
		if l.TLS == nil && l.TLSFiles != nil {
			l.TLS = l.TLSFiles.TLSConfig()
		}
		switch {
		case names[l.Name]:
			return fmt.Errorf("proxy: listener name %q used twice", l.Name)
		case l.Protocol.TLS() && l.TLS == nil:
			return fmt.Errorf("proxy: listener %s (%s) needs a TLS configuration", l.Name, l.Protocol)
		case l.Protocol.SASL() && c.Security.SASL == nil:
			return fmt.Errorf("proxy: listener %s (%s) needs SASL settings", l.Name, l.Protocol)
		}
		if _, ok := parseProtocol(string(l.Protocol)); !ok {
			return fmt.Errorf("proxy: listener %s: unknown security protocol %q", l.Name, l.Protocol)
		}
		names[l.Name] = true
	}
	return nil
}

// bindListeners binds every listener; an advertised address defaults to
// the bound one.
func bindListeners(ctx context.Context, ls []Listener) ([]*boundListener, error) {
	var lc net.ListenConfig
	var out []*boundListener
	for _, l := range ls {
		ln, err := lc.Listen(ctx, "tcp", l.Addr)
		if err != nil {
			closeListeners(out)
			return nil, fmt.Errorf("listen for clients on %s %q: %w", l.Name, l.Addr, err)
		}
		b := &boundListener{Listener: l, ln: ln}
		adv := l.Advertise
		if adv == "" {
			adv = ln.Addr().String()
		}
		if b.host, b.port, err = hostPort(adv); err != nil {
			ln.Close()
			closeListeners(out)
			return nil, fmt.Errorf("proxy: listener %s: advertise address %q: %w", l.Name, adv, err)
		}
		out = append(out, b)
	}
	return out, nil
}

func hostPort(addr string) (string, int32, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return "", 0, errors.New("bad port")
	}
	return host, int32(port), nil
}

func closeListeners(lns []*boundListener) {
	for _, b := range lns {
		b.ln.Close()
	}
}

// ListenerAddr is the bound address of the named listener ("" if none).
func (s *Server) ListenerAddr(name string) string {
	for _, b := range s.lns {
		if b.Name == name {
			return b.ln.Addr().String()
		}
	}
	return ""
}

// wrapTLS returns the connection a listener serves: TLS listeners
// terminate TLS (the handshake runs on the connection's first read or in
// handshake, not in the accept loop).
func (b *boundListener) wrap(nc net.Conn) net.Conn {
	if b.Protocol.TLS() {
		return tls.Server(nc, b.TLS)
	}
	return nc
}
