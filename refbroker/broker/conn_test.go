package broker

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
	"github.com/kproxy/kproxy/layout"
)

// rawConn speaks the Kafka framing by hand, to test what clients cannot
// send.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *rawConn) send(req kmsg.Request, version int16, corr int32) {
	c.t.Helper()
	req.SetVersion(version)
	c.write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, corr))
}

func (c *rawConn) write(frame []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(frame); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// recv reads one response frame: correlation id and the rest.
func (c *rawConn) recv() (int32, []byte, error) {
	f, err := kwire.ReadFrame(c.r, 4, 1<<30, nil)
	if err != nil {
		return 0, nil, err
	}
	buf := *f
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// expectClosed checks the broker closed the connection.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	if _, _, err := c.recv(); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		var ne net.Error
		if !errors.As(err, &ne) || ne.Timeout() {
			c.t.Fatalf("connection still open (read: %v)", err)
		}
	}
}

func TestConnectionRejectsBadRequests(t *testing.T) {
	c := newCluster(t)
	b := c.start(1, func(cfg *Config) { cfg.MaxFrameBytes = 1 << 20 })
	frame := func(body ...byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	header := func(key, version int16) []byte {
		h := binary.BigEndian.AppendUint16(nil, uint16(key))
		h = binary.BigEndian.AppendUint16(h, uint16(version))
		h = binary.BigEndian.AppendUint32(h, 7)
		return binary.BigEndian.AppendUint16(h, 0xffff) // null client id
	}
	cases := []struct {
		name  string
		frame []byte
	}{
		{"oversize frame", binary.BigEndian.AppendUint32(nil, 2<<20)},
		{"negative size", binary.BigEndian.AppendUint32(nil, 0xffffff00)},
		{"short header", frame(0, 3)},
		{"unknown api key", frame(header(999, 0)...)},
		{"api not implemented (AddPartitionsToTxn)", frame(header(24, 0)...)},
		{"metadata version too new", frame(header(3, 99)...)},
		{"truncated metadata body", frame(append(header(3, 1), 0, 0, 0, 5)...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, b.Addr())
			rc.write(tc.frame)
			rc.expectClosed()
		})
	}
	// Other connections are not affected.
	rc := dialRaw(t, b.Addr())
	rc.send(kmsg.NewPtrMetadataRequest(), 1, 3)
	if corr, _, err := rc.recv(); err != nil || corr != 3 {
		t.Fatalf("metadata after rejected connections: corr %d err %v", corr, err)
	}
}

func TestApiVersionsUnsupportedVersion(t *testing.T) {
	c := newCluster(t)
	b := c.start(1, nil)
	rc := dialRaw(t, b.Addr())
	frame := binary.BigEndian.AppendUint32(nil, 10)
	frame = binary.BigEndian.AppendUint16(frame, uint16(kmsg.ApiVersions))
	frame = binary.BigEndian.AppendUint16(frame, 99)
	frame = binary.BigEndian.AppendUint32(frame, 42)
	frame = binary.BigEndian.AppendUint16(frame, 0xffff)
	rc.write(frame)
	corr, body, err := rc.recv()
	if err != nil || corr != 42 {
		t.Fatalf("corr %d err %v", corr, err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode v0 response: %v", err)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("error %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(resp.ErrorCode))
	}
	found := false
	for _, k := range resp.ApiKeys {
		if k.ApiKey == int16(kmsg.ApiVersions) {
			found = k.MaxVersion >= 3
		}
		if k.MinVersion > k.MaxVersion || k.MaxVersion > kmsg.RequestForKey(k.ApiKey).MaxVersion() {
			t.Errorf("key %d advertises %d-%d beyond kmsg's %d", k.ApiKey, k.MinVersion, k.MaxVersion, kmsg.RequestForKey(k.ApiKey).MaxVersion())
		}
	}
	if !found {
		t.Fatal("ApiVersions v3+ not advertised")
	}
}

// A connection answers in request order, unless it said it is kproxy and
// the broker is not in serial mode (where it works on one request at a
// time and advertises nothing).
func TestResponseOrder(t *testing.T) {
	c := newCluster(t)
	b := c.start(1, nil)
	admin := c.clientFor([]string{b.Addr()})
	c.createTopic(admin, "order", 1)
	// A cluster of its own, so that the serial broker leads its partition.
	sc := newCluster(t)
	serial := sc.start(1, func(cfg *Config) { cfg.SerialRequests = true })
	sc.createTopic(sc.clientFor([]string{serial.Addr()}), "order", 1)
	for _, tc := range []struct {
		name        string
		serial      bool
		kproxy      bool
		wantFirstID int32
	}{
		{"ordered", false, false, 1},
		{"kproxy answers when ready", false, true, 2},
		{"serial mode answers kproxy in order", true, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := b.Addr()
			if tc.serial {
				addr = serial.Addr()
			}
			rc := dialRaw(t, addr)
			av := kmsg.NewPtrApiVersionsRequest()
			av.ClientSoftwareName, av.ClientSoftwareVersion = "other", "1"
			if tc.kproxy {
				av.ClientSoftwareName = "kproxy"
			}
			rc.send(av, 3, 0)
			_, body, err := rc.recv()
			if err != nil {
				t.Fatalf("api versions: %v", err)
			}
			hello := kmsg.NewPtrApiVersionsResponse()
			hello.Version = 3
			if err := hello.ReadFrom(body); err != nil {
				t.Fatalf("decode api versions: %v", err)
			}
			advertised := slices.ContainsFunc(hello.SupportedFeatures, func(f kmsg.ApiVersionsResponseSupportedFeature) bool {
				return f.Name == layout.UnorderedResponsesFeature
			})
			if want := tc.wantFirstID == 2; advertised != want {
				t.Fatalf("%s advertised: %v, want %v", layout.UnorderedResponsesFeature, advertised, want)
			}
			// A long poll at the end of an empty partition, then a metadata
			// request.
			f := kmsg.NewPtrFetchRequest()
			f.MaxWaitMillis, f.MinBytes, f.MaxBytes, f.SessionEpoch = 1500, 1, 1<<20, -1
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic = "order"
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 1<<20, -1
			ft.Partitions = append(ft.Partitions, fp)
			f.Topics = append(f.Topics, ft)
			rc.send(f, 11, 1)
			rc.send(kmsg.NewPtrMetadataRequest(), 9, 2)
			first, _, err := rc.recv()
			if err != nil {
				t.Fatal(err)
			}
			second, _, err := rc.recv()
			if err != nil {
				t.Fatal(err)
			}
			if first != tc.wantFirstID || first+second != 3 {
				t.Fatalf("responses came as %d, %d; want %d first", first, second, tc.wantFirstID)
			}
		})
	}
}
