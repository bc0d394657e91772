package upstream

// Dialing a broker: the connection, the ApiVersions handshake that tells
// whether the broker may answer out of order, and frame reading.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
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
	c.mu.Lock()
	if c.err != nil { // closed while dialing
		c.mu.Unlock()
		nc.Close()
		return nil, nil, kindClosed, c.err
	}
	c.nc = nc
	c.mu.Unlock()

	br := bufio.NewReaderSize(nc, readBufferBytes)
	unordered, err := c.handshake(nc, br)
	if err != nil {
		return nil, nil, kindHandshake, fmt.Errorf("handshake: %w", err)
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, nil, kindClosed, c.err
	}
	c.connected = true
	c.unordered = unordered
	c.mu.Unlock()
	close(c.ready)
	c.bp.m.conns.Inc()
	c.bp.p.log.Debug("broker connection open", "broker", c.bp.id, "addr", c.bp.addr, "unordered", unordered, "dedicated", c.idle > 0)
	return nc, br, "", nil
}

// handshake sends ApiVersions and reports whether the broker advertised
// unorderedFeature, i.e. will answer this connection out of order.
func (c *conn) handshake(nc net.Conn, br *bufio.Reader) (bool, error) {
	cfg := &c.bp.p.cfg
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = softwareName
	req.ClientSoftwareVersion = softwareVersion
	frame := kwire.AppendRequestHeader(nil, keyApiVersions, 3, handshakeCorr, &cfg.ClientID, true)
	frame = req.AppendTo(frame)
	kwire.FinishFrame(frame)

	_ = nc.SetDeadline(time.Now().Add(cfg.DialTimeout))
	if _, err := nc.Write(frame); err != nil {
		return false, err
	}
	// ApiVersions responses always have header v0: just the correlation id.
	buf, err := readFrame(br, nil)
	if err != nil {
		return false, err
	}
	resp := *buf
	if len(resp) < 6 || int32(binary.BigEndian.Uint32(resp)) != handshakeCorr {
		return false, errors.New("malformed ApiVersions response")
	}
	if code := int16(binary.BigEndian.Uint16(resp[4:])); code != 0 {
		return false, fmt.Errorf("ApiVersions v3: %w", kerr.ErrorForCode(code))
	}
	return advertisesUnordered(resp[4:]), nc.SetDeadline(time.Time{})
}

// advertisesUnordered reports whether an ApiVersions v3 response body lists
// unorderedFeature at version 1. Anything else, including a body that does
// not decode, means in order: the safe assumption, which Kafka itself
// guarantees.
func advertisesUnordered(body []byte) bool {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(body); err != nil {
		return false
	}
	for _, f := range resp.SupportedFeatures {
		if f.Name == unorderedFeature && f.MinVersion <= 1 && f.MaxVersion >= 1 {
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
