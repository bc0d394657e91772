package proxy

import (
	"testing"

	"github.com/kproxy/kproxy/internal/kwire"
)

func TestResponseHeader(t *testing.T) {
	for _, tc := range []struct {
		h    reqHeader
		want []byte
	}{
		{reqHeader{RequestHeader: kwire.RequestHeader{Key: 3, Corr: 5}}, []byte{0, 0, 0, 7, 0, 0, 0, 5}},
		{reqHeader{RequestHeader: kwire.RequestHeader{Key: 3, Corr: 5, Flexible: true}}, []byte{0, 0, 0, 8, 0, 0, 0, 5, 0}},
		{reqHeader{RequestHeader: kwire.RequestHeader{Key: 18, Corr: 5, Flexible: true}}, []byte{0, 0, 0, 7, 0, 0, 0, 5}},
	} {
		r := responseHeader(&tc.h, 3)
		if got := r.hdr[:r.hlen]; string(got) != string(tc.want) {
			t.Errorf("%+v: header %v, want %v", tc.h, got, tc.want)
		}
	}
}
