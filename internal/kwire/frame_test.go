package kwire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSkipTags(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want int
		ok   bool
	}{
		{[]byte{0}, 1, true},
		{[]byte{0, 9, 9}, 1, true},
		{[]byte{1, 5, 2, 'a', 'b'}, 5, true},
		{[]byte{2, 0, 0, 1, 1, 'x'}, 6, true},
		{[]byte{1, 5, 3, 'a'}, 0, false},
		{[]byte{0x80}, 0, false},
		{nil, 0, false},
	} {
		got, err := SkipTags(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("SkipTags(%v) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestRequestRoundTrip: a frame AppendRequest writes is what kmsg's own
// formatter writes, and ParseRequestHeader finds its body.
func TestRequestRoundTrip(t *testing.T) {
	ft := NewFlexTable()
	id := "c1"
	for _, v := range []int16{4, 12} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
		got := AppendRequest(nil, ft, req, 9, &id)
		want := kmsg.NewRequestFormatter(kmsg.FormatterClientID(id)).AppendRequest(nil, req, 9)
		if !bytes.Equal(got, want) {
			t.Fatalf("v%d: frame %v, kmsg writes %v", v, got, want)
		}
		f, err := ReadFrame(bytes.NewReader(got), 8, 1<<20, nil)
		if err != nil {
			t.Fatalf("v%d: read: %v", v, err)
		}
		h, err := ParseRequestHeader(*f, ft)
		if err != nil || h.Corr != 9 || string(h.ClientID) != id || !bytes.Equal((*f)[h.BodyOff:], req.AppendTo(nil)) {
			t.Fatalf("v%d: header %+v err %v", v, h, err)
		}
	}
}

func TestReadFrameBounds(t *testing.T) {
	var pool BufPool
	for _, tc := range []struct {
		in  []byte
		err error
	}{
		{[]byte{0, 0, 0, 3, 1, 2, 3}, ErrFrameSize},
		{[]byte{0, 0, 1, 0}, ErrFrameSize},
		{[]byte{0xff, 0xff, 0xff, 0}, ErrFrameSize},
		{[]byte{0, 0, 0, 4, 1, 2, 3, 4}, nil},
	} {
		f, err := ReadFrame(bytes.NewReader(tc.in), 4, 255, &pool)
		if !errors.Is(err, tc.err) {
			t.Fatalf("%v: err %v, want %v", tc.in, err, tc.err)
		}
		if err == nil && !bytes.Equal(*f, tc.in[4:]) {
			t.Fatalf("%v: frame %v", tc.in, *f)
		}
	}
}

func TestResponseHeader(t *testing.T) {
	var hdr [MaxResponseHeader]byte
	for _, tc := range []struct {
		flexible bool
		want     []byte
	}{
		{false, []byte{0, 0, 0, 7, 0, 0, 0, 5}},
		{true, []byte{0, 0, 0, 8, 0, 0, 0, 5, 0}},
	} {
		n := PutResponseHeader(&hdr, 5, tc.flexible, 3)
		if !bytes.Equal(hdr[:n], tc.want) {
			t.Errorf("flexible %v: %v, want %v", tc.flexible, hdr[:n], tc.want)
		}
		app := AppendResponseHeader(nil, 5, tc.flexible)
		app = append(app, 1, 2, 3)
		FinishFrame(app)
		if !bytes.Equal(app[:n], tc.want) {
			t.Errorf("flexible %v: appended %v, want %v", tc.flexible, app[:n], tc.want)
		}
	}
}

// TestReadFrameEnds: a stream that ends between frames gives io.EOF, one
// that ends inside a size io.ErrUnexpectedEOF, from a bufio.Reader (read
// in place) as from any reader.
func TestReadFrameEnds(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want error
	}{
		{nil, io.EOF},
		{[]byte{0, 0}, io.ErrUnexpectedEOF},
		{[]byte{0, 0, 0, 8, 1}, io.ErrUnexpectedEOF},
	} {
		for _, r := range []io.Reader{bytes.NewReader(tc.in), bufio.NewReader(bytes.NewReader(tc.in))} {
			if _, err := ReadFrame(r, 0, 255, nil); !errors.Is(err, tc.want) {
				t.Errorf("%v from %T: err %v, want %v", tc.in, r, err, tc.want)
			}
		}
	}
}

// frames is an endless stream of frames of n zero bytes.
type frames struct{ n, off int }

func (f *frames) Read(p []byte) (int, error) {
	for k := range p {
		pos := f.off % (4 + f.n)
		p[k] = 0
		if pos < 4 {
			p[k] = byte(uint32(f.n) >> (8 * (3 - pos)))
		}
		f.off++
	}
	return len(p), nil
}

// TestReadFrameFromBufioAllocatesNothing: with a pool, reading frames from
// a bufio.Reader allocates nothing (a MiB class: its free list, unlike a
// sync.Pool, keeps what is Put even under the race detector).
func TestReadFrameFromBufioAllocatesNothing(t *testing.T) {
	var pool BufPool
	br := bufio.NewReader(&frames{n: 1 << 20})
	pool.Put(pool.Get(1 << 20))
	allocs := testing.AllocsPerRun(20, func() {
		f, err := ReadFrame(br, 4, 2<<20, &pool)
		if err != nil {
			t.Fatal(err)
		}
		pool.Put(f)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per frame, want 0", allocs)
	}
}

func TestParseRequestHeader(t *testing.T) {
	ft := NewFlexTable()
	format := func(req kmsg.Request, clientID *string) []byte {
		f := kmsg.NewRequestFormatter()
		if clientID != nil {
			f = kmsg.NewRequestFormatter(kmsg.FormatterClientID(*clientID))
		}
		return f.AppendRequest(nil, req, 77)[4:]
	}
	meta := func(v int16) kmsg.Request { r := kmsg.NewPtrMetadataRequest(); r.Version = v; return r }
	cs := func(v int16) kmsg.Request { r := kmsg.NewPtrControlledShutdownRequest(); r.Version = v; return r }
	id := "client-1"
	cases := []struct {
		name     string
		frame    []byte
		err      error
		flexible bool
		clientID string
		null     bool
	}{
		{"v1 header", format(meta(4), &id), nil, false, id, false},
		{"v2 header", format(meta(12), &id), nil, true, id, false},
		{"null client id", format(meta(12), nil), nil, true, "", true},
		{"controlled shutdown v0 has header v0", format(cs(0), &id), nil, false, "", true},
		{"controlled shutdown v1 has header v1", format(cs(1), &id), nil, false, id, false},
		{"unknown api versions version", []byte{0, 18, 0, 99, 0, 0, 0, 77, 0xff}, nil, false, "", false},
		{"unknown key", []byte{0x10, 0, 0, 0, 0, 0, 0, 77, 0xff, 0xff}, ErrUnknownAPI, false, "", false},
		{"truncated", []byte{0, 3, 0, 4, 0, 0, 0}, ErrShortHeader, false, "", false},
		{"negative client id length", []byte{0, 3, 0, 4, 0, 0, 0, 77, 0xff, 0xf0}, ErrShortHeader, false, "", false},
		{"bad tags", []byte{0, 3, 0, 12, 0, 0, 0, 77, 0xff, 0xff, 0x81}, ErrBadTags, false, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseRequestHeader(tc.frame, ft)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if h.Corr != 77 || h.Flexible != tc.flexible || string(h.ClientID) != tc.clientID || h.NullClientID != tc.null {
				t.Fatalf("header %+v", h)
			}
			if h.Known && h.BodyOff > len(tc.frame) {
				t.Fatalf("body offset %d past the frame", h.BodyOff)
			}
		})
	}
}
