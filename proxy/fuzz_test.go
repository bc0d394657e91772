package proxy

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
)

func headerSeeds() [][]byte {
	id := "fuzz"
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID(id))
	var seeds [][]byte
	for _, req := range []kmsg.Request{kmsg.NewPtrMetadataRequest(), kmsg.NewPtrProduceRequest(), kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrControlledShutdownRequest()} {
		for _, v := range []int16{0, req.MaxVersion()} {
			req.SetVersion(v)
			seeds = append(seeds, f.AppendRequest(nil, req, 9)[4:])
		}
	}
	return append(seeds, []byte{0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0x81}, []byte{0, 18, 0x7f, 0, 0, 0, 0, 1})
}

// FuzzParseHeader: any frame either parses into a header inside the frame
// or fails with a reason; never a panic.
func FuzzParseHeader(f *testing.F) {
	for _, s := range headerSeeds() {
		f.Add(s)
	}
	ft := kwire.NewFlexTable()
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, err := kwire.ParseRequestHeader(frame, ft)
		if err != nil {
			if r := headerReason(err); r != badHeader && r != badUnknownAPI {
				t.Fatalf("error %v has reason %q", err, r)
			}
			return
		}
		if h.BodyOff < 8 && !(h.Key == int16(kmsg.ApiVersions) && !h.Known) || h.BodyOff > len(frame) {
			t.Fatalf("body offset %d in a %d-byte frame", h.BodyOff, len(frame))
		}
		if flexible, known := ft.Lookup(h.Key, h.Version); known != h.Known || flexible != h.Flexible {
			t.Fatalf("key %d v%d: known %v flexible %v, table says %v %v", h.Key, h.Version, h.Known, h.Flexible, known, flexible)
		}
		if len(h.ClientID) > 0 && (h.NullClientID || len(h.ClientID) > h.BodyOff) {
			t.Fatalf("client id of %d bytes, null %v, body at %d", len(h.ClientID), h.NullClientID, h.BodyOff)
		}
	})
}

// FuzzConnection writes arbitrary bytes to a real client connection of a
// server with a small frame limit and budget. The server must close or
// answer it without panicking, and once it is gone its frame budget must be
// returned in full.
func FuzzConnection(f *testing.F) {
	for _, s := range headerSeeds() {
		f.Add(append([]byte{0, 0, 0, byte(len(s))}, s...))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 1, 0, 0, 0, 3, 0, 4})
	ts := startServer(f, Config{
		MaxFrameBytes: 64 << 10, Logger: slog.New(slog.DiscardHandler),
		Limits: Limits{QueuedMaxRequestBytes: 1 << 20, IdleTimeout: 200 * time.Millisecond},
	}, newFakeDispatcher(false))
	f.Fuzz(func(t *testing.T, in []byte) {
		nc, err := net.DialTimeout("tcp", ts.Addr(), testWait)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(testWait))
		if _, err := nc.Write(in); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
			t.Fatalf("write: %v", err)
		}
		_ = nc.(*net.TCPConn).CloseWrite()
		if _, err := io.Copy(io.Discard, nc); err != nil && !isReset(err) {
			t.Fatalf("connection neither answered nor closed: %v", err)
		}
		nc.Close()
		waitFor(t, func() bool {
			return testutil.ToFloat64(ts.m.conns) == 0 && testutil.ToFloat64(ts.g.queued) == 0
		}, "the connection to end and return its budget")
	})
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}
