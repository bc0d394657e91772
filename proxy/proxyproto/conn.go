// conn.go reads a header off an accepted connection and returns the
// connection to serve: the real client's address from RemoteAddr, the bytes
// read past the header handed back once, and every other method the
// underlying connection's own.

package proxyproto

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/kproxy/kproxy/internal/commalist"
)

// Policy is one listener's PROXY protocol setting. The zero value is off.
type Policy struct {
	// From are the balancers' addresses: a connection from one must start
	// with a header; one from anywhere else must not.
	From []netip.Prefix
}

// On reports whether the listener reads headers at all.
func (p Policy) On() bool { return len(p.From) > 0 }

// Trusted reports whether a connection from a may send a header.
func (p Policy) Trusted(a net.Addr) bool {
	ip, ok := addrIP(a)
	if !ok {
		return false
	}
	for _, pf := range p.From {
		if pf.Contains(ip) {
			return true
		}
	}
	return false
}

func addrIP(a net.Addr) (netip.Addr, bool) {
	if t, ok := a.(*net.TCPAddr); ok {
		ip, ok := netip.AddrFromSlice(t.IP)
		return ip.Unmap(), ok
	}
	ap, err := netip.ParseAddrPort(a.String())
	return ap.Addr().Unmap(), err == nil
}

// firstRead is what the first read of a header asks for: a v1 line or a v2
// header with addresses and a few TLVs, in one read, usually with the
// client's first request behind it.
const firstRead = 256

// Read reads the header a trusted source sends first, within timeout, and
// returns the connection to serve: nc itself (its deadline cleared) behind
// the real client's address, or, for v2 LOCAL and the like, nc's own. On
// error the caller closes nc; nothing read is kept. A connection closed
// before its first byte (a TCP health check) is an error wrapping io.EOF.
// reserve, if not nil, is called with the size of the header's buffer
// before it is made and again before it grows (to MaxHeaderBytes), so the
// caller can count what a header still arriving holds; its error ends the
// read, returned as it is. The buffer is garbage once Read returns.
func Read(nc net.Conn, timeout time.Duration, reserve func(total int) error) (net.Conn, Header, error) {
	if reserve == nil {
		reserve = func(int) error { return nil }
	}
	if err := nc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, Header{}, fmt.Errorf("proxyproto: set read deadline: %w", err)
	}
	if err := reserve(firstRead); err != nil {
		return nil, Header{}, err
	}
	buf := make([]byte, 0, firstRead)
	for {
		n, err := nc.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		h, used, perr := Parse(buf)
		switch {
		case perr == nil:
			if err := nc.SetReadDeadline(time.Time{}); err != nil {
				return nil, Header{}, fmt.Errorf("proxyproto: clear read deadline: %w", err)
			}
			return wrap(nc, h, buf[used:]), h, nil
		case !errors.Is(perr, ErrShort):
			return nil, h, perr
		case err != nil:
			if len(buf) == 0 && errors.Is(err, io.EOF) {
				return nil, h, fmt.Errorf("proxyproto: closed before a header (a health check): %w", err)
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, h, fmt.Errorf("%w (%v, %d bytes in)", ErrTimeout, timeout, len(buf))
			}
			return nil, h, fmt.Errorf("proxyproto: read header: %w", err)
		}
		if len(buf) == cap(buf) { // a v2 header longer than firstRead, at most MaxHeaderBytes
			if err := reserve(MaxHeaderBytes); err != nil {
				return nil, h, err
			}
			grown := make([]byte, len(buf), MaxHeaderBytes)
			copy(grown, buf)
			buf = grown
		}
	}
}

// wrap returns nc as the header describes it, rest the bytes read past the
// header.
func wrap(nc net.Conn, h Header, rest []byte) net.Conn {
	st := state{remote: nc.RemoteAddr()}
	if !h.Local {
		st.remote = net.TCPAddrFromAddrPort(h.Src)
	}
	if len(rest) > 0 {
		st.rest = append([]byte(nil), rest...) // these bytes stay, not the header's buffer
	}
	return st.on(nc)
}

// Untrusted returns nc, from a source not in Policy.From, checked on its
// first read: if its first bytes are a PROXY header, that read fails with
// ErrUntrusted (and refused is called with it, once) so the caller closes
// the connection. A client never chooses its address.
func Untrusted(nc net.Conn, refused func(error)) net.Conn {
	return state{remote: nc.RemoteAddr(), refused: refused}.on(nc)
}

// state is what a connection's wrapper adds: the address it reports, bytes
// to hand back first, and whether its first bytes must not be a header.
type state struct {
	remote  net.Addr
	rest    []byte      // read past the header; handed back first
	refused func(error) // non-nil until the first bytes were checked
}

func (st state) on(nc net.Conn) net.Conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		// Embedding *net.TCPConn keeps its unexported writeBuffers, so
		// net.Buffers.WriteTo still makes one writev on it.
		return &tcpConn{TCPConn: tc, state: st}
	}
	return &conn{Conn: nc, state: st}
}

// plain reports whether reads go straight to the connection.
func (st *state) plain() bool { return st.rest == nil && st.refused == nil }

// read is a Read while rest or the first-bytes check remain.
func (st *state) read(p []byte, r io.Reader) (int, error) {
	if st.rest != nil {
		n := copy(p, st.rest)
		if st.rest = st.rest[n:]; len(st.rest) == 0 {
			st.rest = nil
		}
		return n, nil
	}
	n, err := r.Read(p)
	for n > 0 {
		header, more := LooksLikeHeader(p[:n])
		if !header {
			break
		}
		if !more || n == len(p) || err != nil {
			refused := st.refused
			st.refused = func(error) {}
			refused(ErrUntrusted)
			return 0, ErrUntrusted
		}
		var m int
		m, err = r.Read(p[n:])
		n += m
	}
	if n > 0 {
		st.refused = nil
	}
	return n, err
}

// tcpConn is a TCP connection as its PROXY header describes it.
type tcpConn struct {
	*net.TCPConn
	state
}

func (c *tcpConn) RemoteAddr() net.Addr { return c.remote }

func (c *tcpConn) Read(p []byte) (int, error) {
	if c.plain() {
		return c.TCPConn.Read(p)
	}
	return c.read(p, c.TCPConn)
}

// conn is tcpConn for connections that are not *net.TCPConn (tests).
type conn struct {
	net.Conn
	state
}

func (c *conn) RemoteAddr() net.Addr { return c.remote }

func (c *conn) Read(p []byte) (int, error) {
	if c.plain() {
		return c.Conn.Read(p)
	}
	return c.read(p, c.Conn)
}

// ParseFrom reads a comma-separated list of CIDRs (a bare address is one
// host) as Policy.From.
func ParseFrom(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, e := range commalist.Split(s) {
		p, err := netip.ParsePrefix(e)
		if err != nil {
			a, aerr := netip.ParseAddr(e)
			if aerr != nil {
				return nil, fmt.Errorf("proxyproto: %q is not a CIDR or an address", e)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
