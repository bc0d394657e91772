package proxyproto

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// v2 builds a v2 header: command, family byte, address block and TLV bytes.
func v2(cmd, fam byte, addrs []byte, tlvLen int) []byte {
	b := append([]byte(nil), v2Sig...)
	b = append(b, 0x20|cmd, fam, 0, 0)
	binary.BigEndian.PutUint16(b[14:], uint16(len(addrs)+tlvLen))
	b = append(b, addrs...)
	return append(b, make([]byte, tlvLen)...)
}

func inet4(src, dst string, sport, dport uint16) []byte {
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	b := append(s[:], d[:]...)
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(b, sport), dport)
}

func inet6(src, dst string, sport, dport uint16) []byte {
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	b := append(s[:], d[:]...)
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(b, sport), dport)
}

func TestParse(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		name string
		in   []byte
		want Header
		n    int
		err  error
	}{
		{"v1 tcp4", []byte("PROXY TCP4 10.1.2.3 10.0.0.1 5555 9092\r\nrest"),
			Header{Version: 1, Src: ap("10.1.2.3:5555"), Dst: ap("10.0.0.1:9092")}, 40, nil},
		{"v1 tcp6", []byte("PROXY TCP6 fd00::1 fd00::2 1 65535\r\n"),
			Header{Version: 1, Src: ap("[fd00::1]:1"), Dst: ap("[fd00::2]:65535")}, 36, nil},
		{"v1 tcp6 mapped v4", []byte("PROXY TCP6 ::ffff:10.1.2.3 fd00::2 1 2\r\n"),
			Header{Version: 1, Src: ap("10.1.2.3:1"), Dst: ap("[fd00::2]:2")}, 40, nil},
		{"v1 unknown", []byte("PROXY UNKNOWN whatever\r\n"), Header{Version: 1, Local: true}, 24, nil},
		{"v1 partial", []byte("PROXY TCP4 10.1.2.3"), Header{}, 0, ErrShort},
		{"v1 partial signature", []byte("PRO"), Header{}, 0, ErrShort},
		{"v1 no CRLF in 107 bytes", []byte("PROXY TCP4 " + strings.Repeat("1", 120)), Header{}, 0, ErrInvalid},
		{"v1 LF without CR", []byte("PROXY TCP4 10.1.2.3 10.0.0.1 5555 9092\n"), Header{}, 0, ErrInvalid},
		{"v1 v6 address as TCP4", []byte("PROXY TCP4 fd00::1 10.0.0.1 1 2\r\n"), Header{}, 0, ErrInvalid},
		{"v1 port too big", []byte("PROXY TCP4 10.1.2.3 10.0.0.1 65536 2\r\n"), Header{}, 0, ErrInvalid},
		{"v1 double space", []byte("PROXY TCP4  10.1.2.3 10.0.0.1 1 2\r\n"), Header{}, 0, ErrInvalid},
		{"v1 udp", []byte("PROXY UDP4 10.1.2.3 10.0.0.1 1 2\r\n"), Header{}, 0, ErrInvalid},
		{"v2 inet", append(v2(1, 0x11, inet4("10.1.2.3", "10.0.0.1", 5555, 9092), 0), 'x'),
			Header{Version: 2, Src: ap("10.1.2.3:5555"), Dst: ap("10.0.0.1:9092")}, 28, nil},
		{"v2 inet with TLVs", v2(1, 0x11, inet4("10.1.2.3", "10.0.0.1", 1, 2), 100),
			Header{Version: 2, Src: ap("10.1.2.3:1"), Dst: ap("10.0.0.1:2")}, 128, nil},
		{"v2 inet6", v2(1, 0x21, inet6("fd00::1", "::ffff:10.0.0.1", 1, 2), 0),
			Header{Version: 2, Src: ap("[fd00::1]:1"), Dst: ap("10.0.0.1:2")}, 52, nil},
		{"v2 local", v2(0, 0x00, nil, 0), Header{Version: 2, Local: true}, 16, nil},
		{"v2 local with addresses", v2(0, 0x11, inet4("1.1.1.1", "2.2.2.2", 1, 2), 0), Header{Version: 2, Local: true}, 28, nil},
		{"v2 proxy unspec", v2(1, 0x00, nil, 0), Header{Version: 2, Local: true}, 16, nil},
		{"v2 partial", v2(1, 0x11, inet4("10.1.2.3", "10.0.0.1", 1, 2), 0)[:20], Header{}, 0, ErrShort},
		{"v2 65535-byte TLV block, first 16 bytes", v2(1, 0x11, nil, 65535)[:16], Header{}, 0, ErrTooLarge},
		{"v2 short inet block", v2(1, 0x11, make([]byte, 8), 0), Header{}, 0, ErrInvalid},
		{"v2 udp", v2(1, 0x12, inet4("1.1.1.1", "2.2.2.2", 1, 2), 0), Header{}, 0, ErrInvalid},
		{"v2 unix", v2(1, 0x31, make([]byte, 216), 0), Header{}, 0, ErrInvalid},
		{"v2 version 1", append(append([]byte(nil), v2Sig...), 0x11, 0x11, 0, 0), Header{}, 0, ErrInvalid},
		{"v2 command 2", v2(2, 0x11, inet4("1.1.1.1", "2.2.2.2", 1, 2), 0), Header{}, 0, ErrInvalid},
		{"kafka frame", []byte{0, 0, 0, 20, 0, 18, 0, 3}, Header{}, 0, ErrMissing},
		{"tls client hello", []byte{0x16, 3, 1, 0, 200}, Header{}, 0, ErrMissing},
		{"garbage", []byte("GET / HTTP/1.1\r\n"), Header{}, 0, ErrMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, n, err := Parse(tc.in)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("Parse: err %v, want %v", err, tc.err)
			}
			if h != tc.want && err == nil || n != tc.n {
				t.Fatalf("Parse = %+v, %d; want %+v, %d", h, n, tc.want, tc.n)
			}
		})
	}
}

func TestLooksLikeHeader(t *testing.T) {
	for _, tc := range []struct {
		in           string
		header, more bool
	}{
		{"P", true, true}, {"PROXY ", true, false}, {"PROXY TCP4", true, false},
		{"\r\n\r\n", true, true}, {string(v2Sig), true, false},
		{"\x00\x00\x00\x10", false, false}, {"\x16\x03\x01", false, false}, {"PRX", false, false}, {"", false, false},
	} {
		if h, m := LooksLikeHeader([]byte(tc.in)); h != tc.header || m != tc.more {
			t.Errorf("LooksLikeHeader(%q) = %v, %v; want %v, %v", tc.in, h, m, tc.header, tc.more)
		}
	}
}

func TestReason(t *testing.T) {
	for err, want := range map[error]string{
		ErrMissing: "proxy_header_missing", ErrUntrusted: "proxy_header_untrusted", ErrTooLarge: "proxy_header_too_large",
		ErrTimeout: "proxy_header_timeout", ErrInvalid: "proxy_header_invalid", errors.New("x"): "proxy_header_invalid",
	} {
		if got := Reason(err); got != want {
			t.Errorf("Reason(%v) = %q, want %q", err, got, want)
		}
	}
}

// FuzzParse: any input is parsed without panic, within MaxHeaderBytes, and
// a parsed header parses the same from exactly its own bytes.
func FuzzParse(f *testing.F) {
	f.Add([]byte("PROXY TCP4 10.1.2.3 10.0.0.1 5555 9092\r\n"))
	f.Add([]byte("PROXY UNKNOWN\r\n"))
	f.Add(v2(1, 0x11, inet4("10.1.2.3", "10.0.0.1", 1, 2), 3))
	f.Add(v2(1, 0x21, inet6("fd00::1", "fd00::2", 1, 2), 0))
	f.Add(v2(0, 0x00, nil, 0))
	f.Add([]byte{0, 0, 0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := Parse(b)
		if err != nil {
			if n != 0 {
				t.Fatalf("error %v with length %d", err, n)
			}
			return
		}
		if n <= 0 || n > len(b) || n > MaxHeaderBytes {
			t.Fatalf("length %d of %d bytes", n, len(b))
		}
		if !h.Local && (!h.Src.IsValid() || !h.Dst.IsValid()) {
			t.Fatalf("header %+v without addresses", h)
		}
		h2, n2, err := Parse(b[:n])
		if err != nil || h2 != h || n2 != n {
			t.Fatalf("reparse of its %d bytes: %+v %d %v, want %+v", n, h2, n2, err, h)
		}
	})
}
