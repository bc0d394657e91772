// proxied.go accepts connections on listeners with the PROXY protocol on:
// a trusted balancer's header is read in the connection's own goroutine
// (never in the accept loop), within the request read timeout, before the
// connection is admitted, so per-IP limits, ACL hosts, zones, audit
// records and logs all see the client's address; while it arrives, it
// counts against the connection limit and, as an unfinished frame of the
// balancer's address, the request budget. An untrusted source is served as
// it is and closed if it sends a header.

package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/kproxy/kproxy/proxy/listener"
	"github.com/kproxy/kproxy/proxy/proxyproto"
)

// headerTimeoutWithoutReadTimeout bounds the header when
// --request-read-timeout is off: a balancer sends it at once, and a
// connection that never does must not be held.
const headerTimeoutWithoutReadTimeout = 10 * time.Second

func (s *Server) startProxied(nc net.Conn, bl *listener.Bound) {
	if !bl.ProxyProtocol.Trusted(nc.RemoteAddr()) {
		remote := nc.RemoteAddr().String()
		s.startConn(proxyproto.Untrusted(nc, func(err error) { s.refuseHeader(remote, bl, err) }), bl)
		return
	}
	// Until its header names the client, the connection counts against
	// the connection limit but not the balancer's per-IP one.
	slot, refused := s.g.admitIP("")
	if refused != "" {
		s.g.refuse(nc, refused)
		return
	}
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		slot()
		nc.Close()
		return
	}
	s.connWG.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.connWG.Done()
		pc, ok := s.readHeader(nc, bl)
		slot() // startConn counts it again, as the client
		if ok {
			s.startConn(pc, bl)
		}
	}()
}

// readHeader reads nc's PROXY header and returns the connection to serve.
// While the header arrives, its buffer is an unfinished small frame of the
// balancer's address in the request budget, through the frames' own path
// (growth), so the shares' cuts and kproxy_queued_request_bytes cover it;
// the reservation is given back as soon as the header is read or refused.
// On failure nc is closed, counted and logged.
func (s *Server) readHeader(nc net.Conn, bl *listener.Bound) (net.Conn, bool) {
	ctx, cancel := context.WithTimeout(s.connCtx, s.headerTimeout())
	defer cancel()
	// A forced drain closes a connection still sending its header.
	stop := context.AfterFunc(s.connCtx, func() { nc.Close() })
	var cut atomic.Bool // closed as the largest holder of a share: counted there
	remote := nc.RemoteAddr().String()
	r := &growth{g: s.g, small: true, h: newHolder(clientHost(nc.RemoteAddr()), func(reason string, err error) {
		cut.Store(true)
		s.g.badInput.WithLabelValues(reason).Inc()
		s.g.log.Log(reason, "client connection closed holding the largest unfinished PROXY header", "remote", remote, "listener", bl.Name, "err", err)
		nc.Close()
	})}
	pc, _, err := proxyproto.Read(nc, s.headerTimeout(), func(total int) error {
		if err := r.grow(ctx, total); err != nil {
			return fmt.Errorf("%w: %w", errHeaderBudget, err)
		}
		return nil
	})
	stop()
	s.g.dropShare(r.h)
	s.g.release(r.reserved, true)
	switch {
	case err == nil:
		return pc, true
	case cut.Load() || errors.Is(err, errEvicted): // counted by the cut
	case errors.Is(err, io.EOF): // a health check: connected, closed, sent nothing
		s.log.Debug("client connection closed before its PROXY header", "remote", remote, "listener", bl.Name)
	default:
		s.refuseHeader(remote, bl, err)
	}
	nc.Close()
	return nil, false
}

// badProxyBudget: the request budget refused a PROXY header's buffer (its
// connection's share, or no budget within the header's read timeout).
const badProxyBudget = "proxy_header_budget"

var errHeaderBudget = errors.New("no request budget for the PROXY header")

// initProxied shows the PROXY header reasons of kproxy_bad_input_total at
// zero on a server with a listener that reads headers.
func (s *Server) initProxied() {
	for _, bl := range s.lns {
		if bl.ProxyProtocol.On() {
			for _, r := range proxyproto.Reasons() {
				s.g.badInput.WithLabelValues(r)
			}
			s.g.badInput.WithLabelValues(badProxyBudget)
			return
		}
	}
}

func (s *Server) headerTimeout() time.Duration {
	if t := s.g.lim.RequestReadTimeout; t > 0 {
		return t
	}
	return headerTimeoutWithoutReadTimeout
}

// refuseHeader counts and logs (rate-limited) a connection closed for its
// PROXY header, or the lack of one.
func (s *Server) refuseHeader(remote string, bl *listener.Bound, err error) {
	reason := proxyproto.Reason(err)
	if errors.Is(err, errHeaderBudget) {
		reason = badProxyBudget
	}
	s.g.badInput.WithLabelValues(reason).Inc()
	s.g.log.Log(reason, "client connection closed: PROXY protocol", "remote", remote, "listener", bl.Name, "err", err)
}
