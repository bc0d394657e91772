// proxied.go accepts connections on listeners with the PROXY protocol on:
// a trusted balancer's header is read in the connection's own goroutine
// (never in the accept loop), within the request read timeout, before the
// connection is admitted, so connection limits, ACL hosts, zones, audit
// records and logs all see the client's address; an untrusted source is
// served as it is and closed if it sends a header.

package proxy

import (
	"context"
	"errors"
	"io"
	"net"
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
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		nc.Close()
		return
	}
	s.connWG.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.connWG.Done()
		// A forced drain closes a connection still sending its header.
		stop := context.AfterFunc(s.connCtx, func() { nc.Close() })
		pc, _, err := proxyproto.Read(nc, s.headerTimeout())
		stop()
		if err != nil {
			if errors.Is(err, io.EOF) { // a health check: connected, closed, sent nothing
				s.log.Debug("client connection closed before its PROXY header", "remote", nc.RemoteAddr().String(), "listener", bl.Name)
			} else {
				s.refuseHeader(nc.RemoteAddr().String(), bl, err)
			}
			nc.Close()
			return
		}
		s.startConn(pc, bl)
	}()
}

// initProxied shows the PROXY header reasons of kproxy_bad_input_total at
// zero on a server with a listener that reads headers.
func (s *Server) initProxied() {
	for _, bl := range s.lns {
		if bl.ProxyProtocol.On() {
			for _, r := range proxyproto.Reasons() {
				s.g.badInput.WithLabelValues(r)
			}
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
	s.g.badInput.WithLabelValues(reason).Inc()
	s.g.log.Log(reason, "client connection closed: PROXY protocol", "remote", remote, "listener", bl.Name, "err", err)
}
