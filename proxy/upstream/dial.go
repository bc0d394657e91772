package upstream

// Dialing a broker: the connection (over TLS when configured), the
// ApiVersions handshake that tells whether the broker may answer out of
// order, SASL authentication when configured, and frame reading.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/layout"
)

// connect dials and identifies the proxy so that the broker may answer out
// of order. A failure here is definite for every queued request.
func (c *conn) connect() (net.Conn, *bufio.Reader, string, error) {
	cfg := &c.bp.p.cfg
	d := net.Dialer{Timeout: cfg.DialTimeout}
	nc, err := d.DialContext(c.ctx, "tcp", c.bp.addr)
	if err != nil {
		return nil, nil, kindDial, fmt.Errorf("dial: %w", err)
	}
	host, _, _ := net.SplitHostPort(c.bp.addr)
	if cfg.TLS != nil {
		if nc, err = c.startTLS(nc, cfg.TLS(host)); err != nil {
			return nil, nil, kindHandshake, err
		}
	}
	c.mu.Lock()
	if c.err != nil { // closed while dialing
		c.mu.Unlock()
		nc.Close()
		return nil, nil, kindClosed, c.err
	}
	c.nc = nc
	c.mu.Unlock()

	br := bufio.NewReaderSize(nc, readBufferBytes)
	hello, err := c.handshake(nc, br)
	if err != nil {
		return nil, nil, kindHandshake, fmt.Errorf("handshake: %w", err)
	}
	if cfg.SASL != nil {
		if err := c.authenticate(nc, br, cfg.SASL, c.bp.addr); err != nil {
			return nil, nil, kindHandshake, fmt.Errorf("SASL %s: %w", cfg.SASL.Name(), err)
		}
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, nil, kindClosed, c.err
	}
	c.connected = true
	c.hello = hello
	c.unordered = hello != nil && advertisesUnordered(hello)
	c.mu.Unlock()
	shape := shapeInOrder
	if c.unordered {
		shape = shapeUnordered
	}
	c.bp.shape.Store(shape) // before ready: connFor reads it after the handshake
	close(c.ready)
	c.bp.m.conns.Inc()
	c.bp.p.log.Debug("broker connection open", "broker", c.bp.id, "addr", c.bp.addr, "unordered", c.unordered, "dedicated", c.idle > 0)
	return nc, br, "", nil
}

// handshake identifies the proxy with ApiVersions (v3 carries the software
// name that lets a stub broker answer out of order) and returns the
// broker's answer (nil if it does not decode): its API versions, and
// whether it advertised layout.UnorderedResponsesFeature.
func (c *conn) handshake(nc net.Conn, br *bufio.Reader) (*kmsg.ApiVersionsResponse, error) {
	cfg := &c.bp.p.cfg
	frame := appendHello(nil, handshakeCorr, &cfg.ClientID)

	_ = nc.SetDeadline(time.Now().Add(cfg.DialTimeout))
	if _, err := nc.Write(frame); err != nil {
		return nil, err
	}
	// ApiVersions responses always have header v0: just the correlation id.
	buf, err := readFrame(br, nil)
	if err != nil {
		return nil, err
	}
	resp := *buf
	if len(resp) < 6 || int32(binary.BigEndian.Uint32(resp)) != handshakeCorr {
		return nil, errors.New("malformed ApiVersions response")
	}
	if code := int16(binary.BigEndian.Uint16(resp[4:])); code != 0 {
		return nil, fmt.Errorf("ApiVersions v3: %w", kerr.ErrorForCode(code))
	}
	// A body that does not decode leaves the connection usable, in order
	// (the safe assumption) and with no versions known (see Pool.ApiVersions).
	hello := kmsg.NewPtrApiVersionsResponse()
	hello.Version = 3
	if err := hello.ReadFrom(resp[4:]); err != nil {
		hello = nil
	}
	return hello, nc.SetDeadline(time.Time{})
}

// appendHello appends the proxy's ApiVersions v3 request frame (size
// included) with correlation id corr to dst: the handshake, and the
// barriers of confirm.go.
func appendHello(dst []byte, corr int32, clientID *string) []byte {
	req := kmsg.ApiVersionsRequest{Version: 3, ClientSoftwareName: softwareName, ClientSoftwareVersion: softwareVersion}
	dst = kwire.AppendRequestHeader(dst, keyApiVersions, req.Version, corr, clientID, true)
	dst = req.AppendTo(dst)
	kwire.FinishFrame(dst)
	return dst
}

// startTLS runs the TLS handshake on a dialed connection, within the dial
// timeout; it closes nc if the handshake fails.
func (c *conn) startTLS(nc net.Conn, tc *tls.Config) (net.Conn, error) {
	tlsConn := tls.Client(nc, tc)
	ctx, cancel := context.WithTimeout(c.ctx, c.bp.p.cfg.DialTimeout)
	defer cancel()
	if err := tlsConn.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tlsConn, nil
}

// authenticate runs SaslHandshake v1 and then SaslAuthenticate v1 rounds
// until mech is done, within the dial timeout. A session lifetime the
// broker sets (KIP-368) is not renewed: the broker closes the connection
// at its end and the pool dials again.
func (c *conn) authenticate(nc net.Conn, br *bufio.Reader, mech sasl.Mechanism, addr string) error {
	cfg := &c.bp.p.cfg
	_ = nc.SetDeadline(time.Now().Add(cfg.DialTimeout))
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech.Name()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := roundTrip(nc, br, cfg.ClientID, hs, hsResp); err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return fmt.Errorf("SaslHandshake (the broker enables %v): %w", hsResp.SupportedMechanisms, err)
	}
	ctx, cancel := context.WithTimeout(c.ctx, cfg.DialTimeout)
	defer cancel()
	sess, write, err := mech.Authenticate(ctx, addr)
	if err != nil {
		return err
	}
	for round := 0; ; round++ {
		if round >= maxSASLRounds {
			return fmt.Errorf("not done after %d rounds", maxSASLRounds)
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, write
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := roundTrip(nc, br, cfg.ClientID, req, resp); err != nil {
			return fmt.Errorf("SaslAuthenticate: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = *resp.ErrorMessage
			}
			return fmt.Errorf("SaslAuthenticate: %w (%s)", err, msg)
		}
		done, next, err := sess.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			return nc.SetDeadline(time.Time{})
		}
		write = next
	}
}

// maxSASLRounds bounds an exchange with a broker that never says done
// (SCRAM takes two).
const maxSASLRounds = 10

// roundTrip writes req (not flexible: header v1) and decodes its response
// (header v0) into resp, on a connection nothing else uses yet.
func roundTrip(nc net.Conn, br *bufio.Reader, clientID string, req kmsg.Request, resp kmsg.Response) error {
	frame := kwire.AppendRequestHeader(nil, req.Key(), req.GetVersion(), handshakeCorr, &clientID, false)
	frame = req.AppendTo(frame)
	kwire.FinishFrame(frame)
	if _, err := nc.Write(frame); err != nil {
		return err
	}
	buf, err := readFrame(br, nil)
	if err != nil {
		return err
	}
	b := *buf
	if int32(binary.BigEndian.Uint32(b)) != handshakeCorr {
		return fmt.Errorf("response with another correlation id: %w", errProtocol)
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(b[4:])
}

// advertisesUnordered reports whether an ApiVersions v3 response lists
// layout.UnorderedResponsesFeature at version 1. Anything else means in order: the safe
// assumption, which Kafka itself guarantees.
func advertisesUnordered(resp *kmsg.ApiVersionsResponse) bool {
	for _, f := range resp.SupportedFeatures {
		if f.Name == layout.UnorderedResponsesFeature && f.MinVersion <= 1 && f.MaxVersion >= 1 {
			return true
		}
	}
	return false
}

// readFrame reads one response frame (without its size) into a buffer from
// pool, or a new one when pool is nil. A size out of bounds is a protocol
// violation.
func readFrame(br *bufio.Reader, pool *kwire.BufPool) (*[]byte, error) {
	f, err := kwire.ReadFrame(br, 4, maxResponseBytes, pool)
	if errors.Is(err, kwire.ErrFrameSize) {
		err = fmt.Errorf("response: %w: %w", err, errProtocol)
	}
	return f, err
}

var errProtocol = errors.New("protocol violation")

const keyApiVersions = int16(kmsg.ApiVersions)
