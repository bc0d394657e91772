package kfake

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/internal/kwire/kwiretest"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn sends kmsg requests at exactly the version they carry, which kgo
// does not do (it picks the highest version both sides support). One
// request at a time.
type rawConn struct {
	addr string
	c    net.Conn
	f    *kmsg.RequestFormatter
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{addr: addr, c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("kproxy-kfake-raw"))}
}

// do sends req and decodes the response at req's version. The connection
// is unusable after an error.
func (r *rawConn) do(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	r.corr++
	corr := r.corr
	deadline := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := r.c.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("set deadline: %w", err)
	}
	name := fmt.Sprintf("%s v%d to %s", kmsg.NameForKey(req.Key()), req.GetVersion(), r.addr)
	if _, err := r.c.Write(r.f.AppendRequest(nil, req, corr)); err != nil {
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	body, err := readFrame(r.c)
	if err != nil {
		return nil, fmt.Errorf("read answer to %s: %w", name, err)
	}
	if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != corr {
		return nil, fmt.Errorf("answer to %s: correlation id mismatch (want %d)", name, corr)
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	rd := kbin.Reader{Src: body[4:]}
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) { // ApiVersions answers with a v0 header
		kmsg.SkipTags(&rd)
	}
	if err := rd.Complete(); err != nil {
		return nil, fmt.Errorf("answer to %s: header: %w", name, err)
	}
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("answer to %s is malformed: %w", name, err)
	}
	return resp, nil
}

func readFrame(rd io.Reader) ([]byte, error) {
	f, err := kwire.ReadFrame(rd, 0, 64<<20, nil)
	if err != nil {
		return nil, err
	}
	return *f, nil
}

// vrange is an advertised version range.
type vrange struct{ min, max int16 }

func (r *rawConn) apiVersions(ctx context.Context, t *testing.T) map[int16]vrange {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kproxy-kfake-test", "1"
	resp, err := r.do(ctx, req)
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	av := resp.(*kmsg.ApiVersionsResponse)
	if av.ErrorCode != 0 {
		t.Fatalf("ApiVersions from %s: error %d", r.addr, av.ErrorCode)
	}
	out := map[int16]vrange{}
	for _, k := range av.ApiKeys {
		out[k.ApiKey] = vrange{k.MinVersion, k.MaxVersion}
	}
	return out
}

// recordBatch is one uncompressed, non-idempotent batch holding one record
// with value, as a producer encodes it.
func recordBatch(value string) []byte {
	return kwiretest.Batch{ProducerID: -1, FirstTimestamp: time.Now().UnixMilli(), LeaderEpoch: -1,
		Values: kwiretest.Values(value)}.Encode()
}
