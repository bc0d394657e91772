package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
)

// Bound is a Listener with its socket and advertised address.
type Bound struct {
	Listener
	Ln   net.Listener
	Host string // advertised
	Port int32
}

// AdvertisedAddr is the host:port clients on this listener are told.
func (b *Bound) AdvertisedAddr() string {
	return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
}

// Check turns a listener's TLSFiles into its TLS and checks that names are
// unique, protocols known, TLS listeners have TLS and SASL listeners SASL
// settings (haveSASL).
func Check(ls []Listener, haveSASL bool) error {
	names := map[string]bool{}
	for i := range ls {
		l := &ls[i]
		if l.TLS == nil && l.TLSFiles != nil {
			l.TLS = l.TLSFiles.TLSConfig()
		}
		switch {
		case names[l.Name]:
			return fmt.Errorf("proxy: listener name %q used twice", l.Name)
		case l.Protocol.TLS() && l.TLS == nil:
			return fmt.Errorf("proxy: listener %s (%s) needs a TLS configuration", l.Name, l.Protocol)
		case l.Protocol.SASL() && !haveSASL:
			return fmt.Errorf("proxy: listener %s (%s) needs SASL settings", l.Name, l.Protocol)
		}
		if _, ok := parseProtocol(string(l.Protocol)); !ok {
			return fmt.Errorf("proxy: listener %s: unknown security protocol %q", l.Name, l.Protocol)
		}
		names[l.Name] = true
	}
	return nil
}

// Bind binds every listener; an advertised address defaults to the bound
// one.
func Bind(ctx context.Context, ls []Listener) ([]*Bound, error) {
	var lc net.ListenConfig
	var out []*Bound
	for _, l := range ls {
		ln, err := lc.Listen(ctx, "tcp", l.Addr)
		if err != nil {
			Close(out)
			return nil, fmt.Errorf("listen for clients on %s %q: %w", l.Name, l.Addr, err)
		}
		b := &Bound{Listener: l, Ln: ln}
		adv := l.Advertise
		if adv == "" {
			adv = ln.Addr().String()
		}
		if b.Host, b.Port, err = HostPort(adv); err != nil {
			ln.Close()
			Close(out)
			return nil, fmt.Errorf("proxy: listener %s: advertise address %q: %w", l.Name, adv, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// HostPort splits an advertised host:port; the port must be 1-65535.
func HostPort(addr string) (string, int32, error) {
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

// Close closes every listener's socket.
func Close(lns []*Bound) {
	for _, b := range lns {
		b.Ln.Close()
	}
}

// Wrap returns the connection a listener serves: TLS listeners terminate
// TLS (the handshake runs on the connection's first read or in
// Gate.Open, not in the accept loop).
func (b *Bound) Wrap(nc net.Conn) net.Conn {
	if b.Protocol.TLS() {
		return tls.Server(nc, b.TLS)
	}
	return nc
}
