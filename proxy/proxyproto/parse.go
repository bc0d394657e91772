// Package proxyproto reads the PROXY protocol header (versions 1 and 2, as
// HAProxy's proxy-protocol.txt defines them) that a TCP load balancer sends
// before a client's bytes, so the proxy can serve the connection as coming
// from the real client.
//
// It promises: a header is read only from a trusted source (Policy.From),
// whole within a deadline and at most MaxHeaderBytes, and the connection it
// returns reports the client's address from RemoteAddr and reads on exactly
// where the header ended, with the data path of the underlying *net.TCPConn
// (vectored writes included) untouched. A connection from any other source
// is served as it is, and closed if it starts with a header.
//
// Its limit: TCP over IPv4 and IPv6 only (v1 TCP4/TCP6, v2 AF_INET/AF_INET6
// with STREAM); v2 TLVs are skipped unread, never interpreted; v1 UNKNOWN,
// v2 LOCAL and v2 UNSPEC keep the connection's own addresses.
package proxyproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// MaxHeaderBytes is the largest header accepted: a v2 header whose length
// field claims more is refused as soon as its first 16 bytes are in, so a
// 65,535-byte TLV block is never read or held. Balancers send far less (AWS
// NLB's TLVs, HAProxy's SSL and unique-id TLVs fit in a few hundred bytes).
const MaxHeaderBytes = 4096

// v1MaxBytes is the longest v1 line, CRLF included (proxy-protocol.txt 2.1).
const v1MaxBytes = 107

var (
	v1Sig = []byte("PROXY ")
	v2Sig = []byte("\r\n\r\n\x00\r\nQUIT\n")
)

// v2HeadBytes is the fixed part of a v2 header: signature, version and
// command, family and protocol, and the length of what follows.
const v2HeadBytes = 16

// The reasons a header is refused; Reason gives them as metric labels.
var (
	ErrShort     = errors.New("proxyproto: header incomplete") // need more bytes (Parse only)
	ErrMissing   = errors.New("proxyproto: no PROXY header")   // a trusted source sent something else
	ErrUntrusted = errors.New("proxyproto: PROXY header from an untrusted source")
	ErrInvalid   = errors.New("proxyproto: malformed PROXY header")
	ErrTooLarge  = errors.New("proxyproto: PROXY header too large")
	ErrTimeout   = errors.New("proxyproto: PROXY header not complete within the read timeout")
)

// Header is what a PROXY header says about a connection.
type Header struct {
	Version int // 1 or 2
	// Local: the balancer's own connection (v2 LOCAL, a health check) or
	// one it cannot describe (v1 UNKNOWN, v2 UNSPEC); Src and Dst are
	// unset and the connection's own addresses stand.
	Local    bool
	Src, Dst netip.AddrPort
}

// Parse reads one header from the start of b. It returns the header and
// its length in bytes, or ErrShort if b is the start of a header that is
// not complete yet (or is empty), ErrMissing if b does not start with one, ErrTooLarge
// or an error wrapping ErrInvalid.
func Parse(b []byte) (Header, int, error) {
	switch {
	case len(b) == 0:
		return Header{}, 0, ErrShort
	case hasPrefix(b, v2Sig):
		return parseV2(b)
	case hasPrefix(b, v1Sig):
		return parseV1(b)
	}
	return Header{}, 0, ErrMissing
}

// hasPrefix reports whether b and sig agree on their common length, and b
// is not empty.
func hasPrefix(b, sig []byte) bool {
	n := min(len(b), len(sig))
	return n > 0 && bytes.Equal(b[:n], sig[:n])
}

// LooksLikeHeader reports whether b, the first bytes of a connection, is
// or may become a PROXY header; more is false when b is too short to tell.
func LooksLikeHeader(b []byte) (header, more bool) {
	for _, sig := range [][]byte{v1Sig, v2Sig} {
		if hasPrefix(b, sig) {
			return true, len(b) < len(sig)
		}
	}
	return false, false
}

func parseV1(b []byte) (Header, int, error) {
	if len(b) < len(v1Sig) {
		return Header{}, 0, ErrShort
	}
	end := bytes.IndexByte(b[:min(len(b), v1MaxBytes)], '\n')
	if end < 0 {
		if len(b) >= v1MaxBytes {
			return Header{}, 0, fmt.Errorf("%w: v1 line without CRLF in %d bytes", ErrInvalid, v1MaxBytes)
		}
		return Header{}, 0, ErrShort
	}
	if end == 0 || b[end-1] != '\r' {
		return Header{}, 0, fmt.Errorf("%w: v1 line ends without CRLF", ErrInvalid)
	}
	line := string(b[len(v1Sig) : end-1])
	h, err := parseV1Fields(line)
	if err != nil {
		return Header{}, 0, err
	}
	return h, end + 1, nil
}

// parseV1Fields parses "TCP4 SRC DST SPORT DPORT" (single spaces) or
// "UNKNOWN ...".
func parseV1Fields(line string) (Header, error) {
	h := Header{Version: 1}
	if line == "UNKNOWN" || strings.HasPrefix(line, "UNKNOWN ") {
		h.Local = true
		return h, nil
	}
	f := strings.Split(line, " ")
	if len(f) != 5 || f[0] != "TCP4" && f[0] != "TCP6" {
		return h, fmt.Errorf("%w: v1 line %q: want PROXY TCP4|TCP6 SRC DST SPORT DPORT", ErrInvalid, line)
	}
	v4 := f[0] == "TCP4"
	src, err1 := v1Addr(f[1], f[3], v4)
	dst, err2 := v1Addr(f[2], f[4], v4)
	if err := errors.Join(err1, err2); err != nil {
		return h, fmt.Errorf("%w: v1 line %q: %v", ErrInvalid, line, err)
	}
	h.Src, h.Dst = src, dst
	return h, nil
}

func v1Addr(ip, port string, v4 bool) (netip.AddrPort, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Is4() != v4 || a.Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("address %q", ip)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q", port)
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(p)), nil // as v2's: one spelling per client
}

func parseV2(b []byte) (Header, int, error) {
	if len(b) < v2HeadBytes {
		return Header{}, 0, ErrShort
	}
	total := v2HeadBytes + int(binary.BigEndian.Uint16(b[14:16]))
	if total > MaxHeaderBytes {
		return Header{}, 0, fmt.Errorf("%w: v2 header of %d bytes (at most %d)", ErrTooLarge, total, MaxHeaderBytes)
	}
	if b[12]>>4 != 2 {
		return Header{}, 0, fmt.Errorf("%w: v2 version %d", ErrInvalid, b[12]>>4)
	}
	cmd, fam := b[12]&0x0f, b[13]
	if cmd > 1 {
		return Header{}, 0, fmt.Errorf("%w: v2 command %d", ErrInvalid, cmd)
	}
	if len(b) < total {
		return Header{}, 0, ErrShort
	}
	h := Header{Version: 2}
	if cmd == 0 || fam == 0x00 { // LOCAL, or PROXY with UNSPEC: the connection's own addresses
		h.Local = true
		return h, total, nil
	}
	addrs := b[v2HeadBytes:total]
	switch fam {
	case 0x11: // AF_INET, STREAM
		if len(addrs) < 12 {
			return Header{}, 0, fmt.Errorf("%w: v2 AF_INET block of %d bytes", ErrInvalid, len(addrs))
		}
		h.Src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(addrs[0:4])), binary.BigEndian.Uint16(addrs[8:10]))
		h.Dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(addrs[4:8])), binary.BigEndian.Uint16(addrs[10:12]))
	case 0x21: // AF_INET6, STREAM
		if len(addrs) < 36 {
			return Header{}, 0, fmt.Errorf("%w: v2 AF_INET6 block of %d bytes", ErrInvalid, len(addrs))
		}
		src := netip.AddrFrom16([16]byte(addrs[0:16])).Unmap()
		dst := netip.AddrFrom16([16]byte(addrs[16:32])).Unmap()
		h.Src = netip.AddrPortFrom(src, binary.BigEndian.Uint16(addrs[32:34]))
		h.Dst = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(addrs[34:36]))
	default:
		return Header{}, 0, fmt.Errorf("%w: v2 family and protocol 0x%02x (only TCP over IPv4 or IPv6)", ErrInvalid, fam)
	}
	return h, total, nil // TLVs after the addresses are skipped
}

// reasons pairs each refusal with its label; anything else is invalid.
func reasons() []struct {
	err    error
	reason string
} {
	return []struct {
		err    error
		reason string
	}{
		{ErrMissing, "proxy_header_missing"}, {ErrUntrusted, "proxy_header_untrusted"},
		{ErrTooLarge, "proxy_header_too_large"}, {ErrTimeout, "proxy_header_timeout"},
		{ErrInvalid, "proxy_header_invalid"},
	}
}

// Reason is err's label for metrics and rate-limited logs.
func Reason(err error) string {
	for _, r := range reasons() {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "proxy_header_invalid"
}

// Reasons are every label Reason returns.
func Reasons() []string {
	var out []string
	for _, r := range reasons() {
		out = append(out, r.reason)
	}
	return out
}
