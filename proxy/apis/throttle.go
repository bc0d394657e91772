// Throttle patching: raising throttle_time_ms in an encoded response, in
// place where the field's position is known, else by re-encoding.

package apis

import (
	"bytes"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// throttleSentinel marks where a probe encoding puts throttle_time_ms.
const throttleSentinel = 0x7a5b3c2d

// throttlePos is where a response version has throttle_time_ms.
type throttlePos uint8

const (
	throttleNone      throttlePos = iota // no such field
	throttleFirst                        // bytes 0-3 of the body
	throttleElsewhere                    // after fields of varying size
)

// throttleAt says, per API key and version, where throttle_time_ms is,
// found once by encoding an empty response with a sentinel throttle. When
// first, it is at bytes 0-3 of any answer of that version, the proxy's own
// or a broker's passed through, so the proxy can raise it in place without
// decoding the body.
var throttleAt = func() (t [numKeys][]throttlePos) {
	var want [4]byte
	binary.BigEndian.PutUint32(want[:], throttleSentinel)
	for k := range numKeys {
		resp := kmsg.ResponseForKey(int16(k))
		st, ok := resp.(interface{ SetThrottle(int32) })
		if resp == nil || !ok {
			continue
		}
		t[k] = make([]throttlePos, resp.MaxVersion()+1)
		for v := range t[k] {
			resp.SetVersion(int16(v))
			st.SetThrottle(throttleSentinel)
			switch i := bytes.Index(resp.AppendTo(nil), want[:]); {
			case i == 0:
				t[k][v] = throttleFirst
			case i > 0:
				t[k][v] = throttleElsewhere
			}
		}
	}
	return t
}()

// SetThrottle raises the throttle_time_ms of an encoded response to ms
// (a broker's larger throttle stays). Where the field is first it is
// written in place; elsewhere (Produce, where it is last, after fields a
// broker may add) the response is decoded and encoded again, which only
// throttled clients pay for. It reports whether the response carries the
// throttle: versions without the field (Fetch v0, ...) leave the read
// delay as the only throttle.
func SetThrottle(key, version int16, r *Reply, ms int32) bool {
	if key < 0 || int(key) >= numKeys || version < 0 || int(version) >= len(throttleAt[key]) {
		return false
	}
	switch throttleAt[key][version] {
	case throttleNone:
		return false
	case throttleElsewhere:
		return reencodeThrottle(key, version, r, ms)
	}
	b := r.Body
	if b == nil && len(r.Parts) > 0 {
		b = r.Parts[0]
	}
	if len(b) < 4 {
		return false
	}
	if old := int32(binary.BigEndian.Uint32(b)); old < ms {
		binary.BigEndian.PutUint32(b, uint32(ms))
	}
	return true
}

// throttler is a response with throttle_time_ms.
type throttler interface {
	kmsg.Response
	Throttle() (int32, bool)
	SetThrottle(int32)
}

// reencodeThrottle decodes the body, raises its throttle and encodes it
// again into new memory.

func reencodeThrottle(key, version int16, r *Reply, ms int32) bool {
	resp, ok := kmsg.ResponseForKey(key).(throttler)
	if !ok || r.Parts != nil || r.Body == nil {
		return false
	}
	resp.SetVersion(version)
	if err := resp.ReadFrom(r.Body); err != nil {
		return false // left as it is: the client decodes what it would have
	}
	if old, _ := resp.Throttle(); old >= ms {
		return true
	}
	resp.SetThrottle(ms)
	body := resp.AppendTo(nil)
	if r.Release != nil { // the old body's memory is done with
		r.Release()
		r.Release = nil
	}
	r.Body = body
	return true
}
