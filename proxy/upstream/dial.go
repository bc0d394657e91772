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
	hello, err := c.handshake(nc, br)
	if err != nil {
		return nil, nil, kindHandshake, fmt.Errorf("handshake: %w", err)
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
	close(c.ready)
	c.bp.m.conns.Inc()
	c.bp.p.log.Debug("broker connection open", "broker", c.bp.id, "addr", c.bp.addr, "unordered", c.unordered, "dedicated", c.idle > 0)
	return nc, br, "", nil
}

// handshake identifies the proxy with ApiVersions (v3 carries the software
// name that lets a stub broker answer out of order) and returns the
// broker's answer (nil if it does not decode): its API versions, and
// whether it advertised unorderedFeature.
func (c *conn) handshake(nc net.Conn, br *bufio.Reader) (*kmsg.ApiVersionsResponse, error) {
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

// advertisesUnordered reports whether an ApiVersions v3 response lists
// unorderedFeature at version 1. Anything else means in order: the safe
// assumption, which Kafka itself guarantees.
func advertisesUnordered(resp *kmsg.ApiVersionsResponse) bool {
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

const keyApiVersions = int16(kmsg.ApiVersions)
