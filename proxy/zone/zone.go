// Package zone finds the availability zone of a Kafka client, so that the
// proxy can keep its reads on brokers of the same zone (routing.RouteRead).
// The zone comes from, in order:
//  1. the Fetch request's RackID (KIP-392: the consumer's client.rack,
//     Fetch v11+);
//  2. a token in client.id: zone=Z (Bufstream's), ws_az=Z or
//     warpstream_az=Z (WarpStream's), diskless_az=Z (Aiven Inkless's);
//     tokens are separated by commas, e.g. "app,zone=us-east-1a";
//  3. the client's address, by a list of address ranges (CIDRs);
//  4. the proxy's own zone.
//
// Its limit: it believes what the client says. A client that names the
// wrong zone only costs itself cross-zone traffic; routing stays correct
// because every broker serves every partition's committed data.
package zone

import (
	"fmt"
	"net/netip"
	"strings"
)

// Source says where a client's zone came from.
type Source uint8

const (
	None     Source = iota // no zone is known
	Rack                   // the Fetch request's RackID
	ClientID               // a client.id token
	Address                // the client's address range
	Proxy                  // the proxy's own zone
)

// Sources lists every Source, for metrics known in advance.
func Sources() []Source { return []Source{None, Rack, ClientID, Address, Proxy} }

// String is the source as a metric label.
func (s Source) String() string {
	switch s {
	case Rack:
		return "rack"
	case ClientID:
		return "client_id"
	case Address:
		return "cidr"
	case Proxy:
		return "proxy_zone"
	}
	return "none"
}

// Range maps client addresses to a zone.
type Range struct {
	Prefix netip.Prefix
	Zone   string
}

// Resolver finds clients' zones. The zero value knows none; it is read-only
// once built, so one Resolver serves every connection.
type Resolver struct {
	Ranges []Range // the first range that holds the address wins
	Own    string  // the proxy's zone
}

// tokens are the client.id keys that name a zone.
var tokens = [...]string{"zone=", "ws_az=", "warpstream_az=", "diskless_az="}

// Of returns the zone of a client that sent rack (the Fetch RackID, "" if
// none) and clientID from addr (its IP address, "" if unknown). It does not
// allocate.
func (r *Resolver) Of(rack, clientID, addr string) (string, Source) {
	if rack != "" {
		return rack, Rack
	}
	if z := FromClientID(clientID); z != "" {
		return z, ClientID
	}
	if len(r.Ranges) > 0 && addr != "" {
		if ip, err := netip.ParseAddr(addr); err == nil {
			ip = ip.Unmap()
			for _, rg := range r.Ranges {
				if rg.Prefix.Contains(ip) {
					return rg.Zone, Address
				}
			}
		}
	}
	if r.Own != "" {
		return r.Own, Proxy
	}
	return "", None
}

// FromClientID returns the zone a client.id names ("" if none): the value
// of the first comma-separated token that starts with one of the zone keys.
func FromClientID(id string) string {
	for id != "" {
		tok, rest, _ := strings.Cut(id, ",")
		id = rest
		tok = strings.TrimSpace(tok)
		for _, k := range tokens {
			if v, ok := strings.CutPrefix(tok, k); ok && v != "" {
				return v
			}
		}
	}
	return ""
}

// ParseRanges reads "CIDR=ZONE,CIDR=ZONE" (the --zone-cidrs flag).
func ParseRanges(spec string) ([]Range, error) {
	var out []Range
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		cidr, z, ok := strings.Cut(item, "=")
		if !ok || strings.TrimSpace(z) == "" {
			return nil, fmt.Errorf("zone range %q: want CIDR=ZONE", item)
		}
		p, err := netip.ParsePrefix(strings.TrimSpace(cidr))
		if err != nil {
			return nil, fmt.Errorf("zone range %q: %w", item, err)
		}
		out = append(out, Range{Prefix: p.Masked(), Zone: strings.TrimSpace(z)})
	}
	return out, nil
}

// Locality labels whether a broker is in its client's zone: "true",
// "false", or "unknown" when either zone is unknown.
func Locality(client, broker string) string {
	switch {
	case client == "" || broker == "":
		return "unknown"
	case client == broker:
		return "true"
	}
	return "false"
}

// Localities lists Locality's values, for metrics known in advance.
func Localities() []string { return []string{"true", "false", "unknown"} }
