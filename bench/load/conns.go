package load

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
)

// Idle is a set of open, idle client connections.
type Idle struct {
	conns []net.Conn
}

// OpenIdle opens n connections to addr, each doing what a client does when
// it connects (ApiVersions, then Metadata without topics) and then nothing.
// It dials parallel connections at a time.
func OpenIdle(ctx context.Context, addr string, n, parallel int) (*Idle, error) {
	if n <= 0 || parallel <= 0 {
		return nil, errors.New("open idle connections: n and parallel must be positive")
	}
	idle := &Idle{conns: make([]net.Conn, n)}
	errc := make(chan error, n)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := greet(ctx, addr)
			if err != nil {
				errc <- fmt.Errorf("connection %d: %w", i, err)
				return
			}
			idle.conns[i] = c
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		idle.Close()
		return nil, fmt.Errorf("open idle connections to %s: %w", addr, err)
	}
	return idle, nil
}

// Len is the number of connections held.
func (i *Idle) Len() int { return len(i.conns) }

// Close closes every connection.
func (i *Idle) Close() {
	for _, c := range i.conns {
		if c != nil {
			c.Close()
		}
	}
}

// greet dials addr and completes ApiVersions and Metadata.
func greet(ctx context.Context, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		c.Close()
		return nil, fmt.Errorf("set deadline: %w", err)
	}
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kbench-idle"))
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "kbench", "1"
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	md.Topics = []kmsg.MetadataRequestTopic{} // none (nil would mean all)
	for corr, req := range []kmsg.Request{av, md} {
		if _, err := c.Write(f.AppendRequest(nil, req, int32(corr))); err != nil {
			c.Close()
			return nil, fmt.Errorf("write %s: %w", kmsg.NameForKey(req.Key()), err)
		}
		body, err := readResponse(c, int32(corr), req.IsFlexible() && req.Key() != 18)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("read %s response: %w", kmsg.NameForKey(req.Key()), err)
		}
		resp := req.ResponseKind()
		if err := resp.ReadFrom(body); err != nil {
			c.Close()
			return nil, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
		}
		if avr, ok := resp.(*kmsg.ApiVersionsResponse); ok {
			if err := kerr.ErrorForCode(avr.ErrorCode); err != nil {
				c.Close()
				return nil, fmt.Errorf("ApiVersions: %w", err)
			}
		}
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		c.Close()
		return nil, fmt.Errorf("clear deadline: %w", err)
	}
	return c, nil
}

// readResponse reads one response frame and returns its body. ApiVersions
// responses always use header v0 (no tagged fields), whatever the version.
func readResponse(r io.Reader, corr int32, flexibleHeader bool) ([]byte, error) {
	f, err := kwire.ReadFrame(r, 4, 64<<20, nil)
	if err != nil {
		return nil, err
	}
	buf := *f
	if got := int32(binary.BigEndian.Uint32(buf)); got != corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	body := buf[4:]
	if flexibleHeader {
		if len(body) == 0 || body[0] != 0 {
			return nil, errors.New("response header has tagged fields; not expected")
		}
		body = body[1:]
	}
	return body, nil
}
