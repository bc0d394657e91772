package main

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/kproxy/kproxy/internal/commalist"
	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/proxyproto"
)

// listenerFlags are Kafka's listener settings; --listen and --advertise
// remain the one-PLAINTEXT-listener shorthand.
func listenerFlags() []cli.Flag {
	return []cli.Flag{
		stringFlag("listeners", "", "Kafka-style listeners, comma-separated NAME://HOST:PORT (NAME a security protocol PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, or a name in --listener-security-protocol-map); replaces --listen"),
		stringFlag("advertised-listeners", "", "NAME://HOST:PORT per listener: the address Metadata gives clients that came in on it (default: its bound address); replaces --advertise"),
		stringFlag("listener-security-protocol-map", "", "NAME:PROTOCOL pairs, comma-separated, for listeners not named after their protocol"),
		stringFlag("proxy-protocol-from", "", "load balancers' CIDRs, comma-separated: connections from them must start with a PROXY protocol v1 or v2 header (before TLS) naming the real client; from anywhere else a header closes the connection (empty: off)"),
		stringFlag("listener-proxy-protocol-from", "", "NAME:CIDR pairs, comma-separated: --proxy-protocol-from for one listener (a listener named here uses only its own CIDRs)"),
	}
}

// listenersFromFlags returns the configured listeners, or nil when only
// --listen (and --advertise) are set.
func listenersFromFlags(c *cli.Context) ([]listener.Listener, error) {
	proxied := c.String("proxy-protocol-from") != "" || c.String("listener-proxy-protocol-from") != ""
	if c.String("listeners") == "" {
		if c.String("advertised-listeners") != "" {
			return nil, fmt.Errorf("--advertised-listeners needs --listeners")
		}
		if !proxied {
			return nil, nil
		}
		// --listen's one listener, spelled out to carry the policy.
		ls := []listener.Listener{{Name: string(listener.Plaintext), Protocol: listener.Plaintext, Addr: c.String("listen"), Advertise: c.String("advertise")}}
		return ls, withProxyProtocol(c, ls)
	}
	ls, err := listener.ParseListeners(c.String("listeners"), c.String("advertised-listeners"), c.String("listener-security-protocol-map"))
	if err != nil {
		return nil, fmt.Errorf("--listeners: %w", err)
	}
	return ls, withProxyProtocol(c, ls)
}

// withProxyProtocol sets each listener's PROXY protocol sources:
// --listener-proxy-protocol-from's for the listeners it names, else
// --proxy-protocol-from's.
func withProxyProtocol(c *cli.Context, ls []listener.Listener) error {
	all, err := proxyproto.ParseFrom(c.String("proxy-protocol-from"))
	if err != nil {
		return fmt.Errorf("--proxy-protocol-from: %w", err)
	}
	own := map[string][]netip.Prefix{}
	for _, pair := range commalist.Split(c.String("listener-proxy-protocol-from")) {
		name, cidr, ok := strings.Cut(pair, ":") // listener names have no ':'; IPv6 CIDRs do
		from, err := proxyproto.ParseFrom(cidr)
		if !ok || name == "" || err != nil {
			return fmt.Errorf("--listener-proxy-protocol-from entry %q: want NAME:CIDR", pair)
		}
		own[strings.ToUpper(name)] = append(own[strings.ToUpper(name)], from...)
	}
	for i := range ls {
		ls[i].ProxyProtocol.From = all
		if from, ok := own[ls[i].Name]; ok {
			ls[i].ProxyProtocol.From = from
			delete(own, ls[i].Name)
		}
	}
	if len(own) > 0 {
		return fmt.Errorf("--listener-proxy-protocol-from: no listener named %s", strings.Join(slices.Sorted(maps.Keys(own)), ", "))
	}
	return nil
}
