package proxy

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kproxy/kproxy/internal/kwire"
)

func TestParseHeader(t *testing.T) {
	ft := kwire.NewFlexTable()
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
		{"unknown key", []byte{0x10, 0, 0, 0, 0, 0, 0, 77, 0xff, 0xff}, errUnknownAPI, false, "", false},
		{"truncated", []byte{0, 3, 0, 4, 0, 0, 0}, errShortHeader, false, "", false},
		{"negative client id length", []byte{0, 3, 0, 4, 0, 0, 0, 77, 0xff, 0xf0}, errShortHeader, false, "", false},
		{"bad tags", []byte{0, 3, 0, 12, 0, 0, 0, 77, 0xff, 0xff, 0x81}, errBadTags, false, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := parseHeader(tc.frame, ft)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if h.corr != 77 || h.flexible != tc.flexible || string(h.clientID) != tc.clientID || h.nullClientID != tc.null {
				t.Fatalf("header %+v", h)
			}
			if h.known && h.bodyOff > len(tc.frame) {
				t.Fatalf("body offset %d past the frame", h.bodyOff)
			}
		})
	}
}

func TestResponseHeader(t *testing.T) {
	for _, tc := range []struct {
		h    reqHeader
		want []byte
	}{
		{reqHeader{key: 3, corr: 5}, []byte{0, 0, 0, 7, 0, 0, 0, 5}},
		{reqHeader{key: 3, corr: 5, flexible: true}, []byte{0, 0, 0, 8, 0, 0, 0, 5, 0}},
		{reqHeader{key: 18, corr: 5, flexible: true}, []byte{0, 0, 0, 7, 0, 0, 0, 5}},
	} {
		r := responseHeader(&tc.h, 3)
		if got := r.hdr[:r.hlen]; string(got) != string(tc.want) {
			t.Errorf("%+v: header %v, want %v", tc.h, got, tc.want)
		}
	}
}
