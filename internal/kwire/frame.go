package kwire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka frames: a 4-byte big-endian size, then a request header (api key,
// version, correlation id, client id, and tagged fields when flexible) or a
// response header (correlation id, and tagged fields when flexible), then
// the body, which kmsg encodes and decodes.

var (
	// ErrShortHeader: a request header ends before its fields do.
	ErrShortHeader = errors.New("request header truncated")
	// ErrUnknownAPI: kmsg does not know the request's key and version.
	ErrUnknownAPI = errors.New("unknown api key or version")
	// ErrBadTags: a tagged-field section does not parse.
	ErrBadTags = errors.New("malformed tagged fields")
	// ErrFrameSize: a frame's size is outside what the reader accepts.
	ErrFrameSize = errors.New("frame size out of bounds")
)

// SkipTags returns the length of the tagged-field section at the start of b.
func SkipTags(b []byte) (int, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return 0, ErrBadTags
	}
	off := w
	for i := uint64(0); i < n; i++ {
		if _, w = binary.Uvarint(b[off:]); w <= 0 { // tag id
			return 0, ErrBadTags
		}
		off += w
		size, w := binary.Uvarint(b[off:])
		if w <= 0 || uint64(len(b)-off-w) < size {
			return 0, ErrBadTags
		}
		off += w + int(size)
	}
	return off, nil
}

// RequestHeader is a parsed request header.
type RequestHeader struct {
	Key, Version int16
	Corr         int32
	ClientID     []byte // aliases the frame
	NullClientID bool
	Flexible     bool // the request (and so its response) uses flexible headers
	Known        bool // kmsg knows this key and version
	BodyOff      int  // where the body starts in the frame
}

const (
	keyApiVersions        = int16(kmsg.ApiVersions)
	keyControlledShutdown = int16(kmsg.ControlledShutdown)
)

// ParseRequestHeader reads the header at the start of frame (the bytes
// after the size). Only ApiVersions may have a version kmsg does not know:
// Kafka answers it with a v0 UNSUPPORTED_VERSION response, so its body is
// left unparsed (BodyOff = len(frame)).
func ParseRequestHeader(frame []byte, flex FlexTable) (RequestHeader, error) {
	var h RequestHeader
	if len(frame) < 8 {
		return h, fmt.Errorf("%d-byte frame: %w", len(frame), ErrShortHeader)
	}
	h.Key = int16(binary.BigEndian.Uint16(frame))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.Corr = int32(binary.BigEndian.Uint32(frame[4:]))
	h.Flexible, h.Known = flex.Lookup(h.Key, h.Version)
	if !h.Known {
		if h.Key == keyApiVersions {
			h.BodyOff = len(frame)
			return h, nil
		}
		return h, fmt.Errorf("key %d version %d: %w", h.Key, h.Version, ErrUnknownAPI)
	}
	off := 8
	if h.Key == keyControlledShutdown && h.Version == 0 { // header v0: no client id
		h.NullClientID, h.BodyOff = true, off
		return h, nil
	}
	if len(frame) < off+2 {
		return h, fmt.Errorf("client id length: %w", ErrShortHeader)
	}
	n := int(int16(binary.BigEndian.Uint16(frame[off:])))
	off += 2
	switch {
	case n == -1:
		h.NullClientID = true
	case n < -1 || len(frame) < off+n:
		return h, fmt.Errorf("client id of %d bytes: %w", n, ErrShortHeader)
	default:
		h.ClientID = frame[off : off+n]
		off += n
	}
	if h.Flexible {
		k, err := SkipTags(frame[off:])
		if err != nil {
			return h, fmt.Errorf("header tags: %w", err)
		}
		off += k
	}
	h.BodyOff = off
	return h, nil
}

// AppendRequestHeader appends a size placeholder and a request header (v1,
// or v2 when flexible; a nil clientID is sent as null). Append the body,
// then call FinishFrame.
func AppendRequestHeader(dst []byte, key, version int16, corr int32, clientID *string, flexible bool) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(key))
	dst = binary.BigEndian.AppendUint16(dst, uint16(version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if clientID == nil {
		dst = binary.BigEndian.AppendUint16(dst, 0xffff)
	} else {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(*clientID)))
		dst = append(dst, *clientID...)
	}
	if flexible {
		dst = append(dst, 0) // no tagged fields
	}
	return dst
}

// CorrOffset is where the correlation id sits in a request frame (size
// included), for writers that assign it after building the frame.
const CorrOffset = 8

// ResponseHeaderFlexible says whether the response to key at a flexible
// version has a flexible header: ApiVersions responses always use header
// v0, so that a client that sent a version the server does not know can
// still read them.
func ResponseHeaderFlexible(key int16, flexible bool) bool {
	return flexible && key != keyApiVersions
}

// MaxResponseHeader is the size of the longest response header, size
// included.
const MaxResponseHeader = 9

// PutResponseHeader writes into dst the size and header of a response with
// a body of bodyLen bytes and returns the header's length (8, or 9 with
// an empty tagged-field section when flexible).
func PutResponseHeader(dst *[MaxResponseHeader]byte, corr int32, flexible bool, bodyLen int) int {
	n := 8
	if flexible {
		n = 9
		dst[8] = 0
	}
	binary.BigEndian.PutUint32(dst[:], uint32(n-4+bodyLen))
	binary.BigEndian.PutUint32(dst[4:], uint32(corr))
	return n
}

// AppendResponseHeader appends a size placeholder and a response header.
// Append the body, then call FinishFrame.
func AppendResponseHeader(dst []byte, corr int32, flexible bool) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if flexible {
		dst = append(dst, 0)
	}
	return dst
}

// FinishFrame writes the size of frame (which starts with the
// placeholder of AppendRequestHeader or AppendResponseHeader).
func FinishFrame(frame []byte) { binary.BigEndian.PutUint32(frame, uint32(len(frame)-4)) }

// AppendRequest appends a whole request frame for req at its version.
func AppendRequest(dst []byte, flex FlexTable, req kmsg.Request, corr int32, clientID *string) []byte {
	flexible, _ := flex.Lookup(req.Key(), req.GetVersion())
	dst = AppendRequestHeader(dst, req.Key(), req.GetVersion(), corr, clientID, flexible)
	dst = req.AppendTo(dst)
	FinishFrame(dst)
	return dst
}

// ReadFrame reads one frame (without its size) of minSize to maxSize bytes
// into a buffer from pool, or a new one when pool is nil. It allocates the
// claimed size at once, which suits peers the caller trusts (brokers);
// frames from clients go through BufPool.ReadGrowing.
// From a *bufio.Reader (the hot paths) it allocates nothing but the frame.
func ReadFrame(r io.Reader, minSize, maxSize int32, pool *BufPool) (*[]byte, error) {
	n, err := ReadSize(r)
	if err != nil {
		return nil, err
	}
	if n < minSize || n > maxSize {
		return nil, fmt.Errorf("frame of %d bytes outside [%d, %d]: %w", n, minSize, maxSize, ErrFrameSize)
	}
	var buf *[]byte
	if pool != nil {
		buf = pool.Get(int(n))
	} else {
		b := make([]byte, 0, n)
		buf = &b
	}
	*buf = (*buf)[:n]
	if _, err := io.ReadFull(r, *buf); err != nil {
		if pool != nil {
			pool.Put(buf)
		}
		return nil, err
	}
	return buf, nil
}

// ReadSize reads a frame's size, for readers that bound and read the body
// themselves. A size buffer handed to an io.Reader escapes to the heap, so
// a bufio.Reader is read in place.
func ReadSize(r io.Reader) (int32, error) {
	if br, ok := r.(*bufio.Reader); ok {
		b, err := br.Peek(4)
		if err != nil {
			if len(b) > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		n := int32(binary.BigEndian.Uint32(b))
		_, _ = br.Discard(4) // buffered: cannot fail
		return n, nil
	}
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(sz[:])), nil
}

// ReadChunkBytes is how far ReadGrowingReserved reads, and reserves, ahead
// of the bytes of a frame that have arrived: a claimed length costs nothing
// until its bytes come, and then only what came plus one chunk.
const ReadChunkBytes = 64 << 10

// ReadGrowing reads an n-byte frame body from r into a buffer from the pool
// that grows as the bytes arrive, so that a peer claiming a large frame and
// sending little holds little memory. The returned slice has length n; Put
// it back when done. On error nothing is kept.
func (p *BufPool) ReadGrowing(r io.Reader, n int) (*[]byte, error) {
	return p.ReadGrowingReserved(r, n, nil)
}

// ReadGrowingReserved is ReadGrowing that calls reserve(total) before it
// reads bytes up to total, so a caller can account for the bytes as they
// arrive instead of as claimed. total only grows, ends at n, and is at
// most the bytes that have arrived plus ReadChunkBytes; from a
// *bufio.Reader (the bytes it buffered count as arrived) the first call
// waits for the first byte, so a bare size claim reserves nothing. An error
// from reserve ends the read with that error.
//
// The buffer doubles as it fills, so it is at most twice total (and the
// growth copies at most about n bytes in all): reserving its capacity
// instead would run ahead of the bytes, and a buffer planned ahead (as
// before, 8x) held memory nobody had sent.
func (p *BufPool) ReadGrowingReserved(r io.Reader, n int, reserve func(total int) error) (*[]byte, error) {
	return p.ReadGrowingObserved(r, n, reserve, nil)
}

// Observer sees a frame's bytes as they are read: after each read returns
// (while its bytes are in the cache), the bytes read so far, the last k of
// them new, so that a pass over them (a checksum, a walk of the records)
// costs no second read from memory. read is only valid during the call:
// the buffer moves as it grows. That needs chunks the cache
// still holds when the read returns: ReadGrowingObserved reads at most
// ReadChunkBytes at a time; a reader that reads megabytes in one call
// should hand them over in pieces of a few hundred KiB read one by one
// (measured: validation's cost over off went from 1.14x back to 1.31-1.36x
// with whole-frame reads).
type Observer interface {
	Observe(read []byte, k int)
}

// ReadGrowingObserved is ReadGrowingReserved that hands every chunk read
// to obs (if not nil).
func (p *BufPool) ReadGrowingObserved(r io.Reader, n int, reserve func(total int) error, obs Observer) (*[]byte, error) {
	br, _ := r.(*bufio.Reader)
	if n > 0 && br != nil {
		if _, err := br.Peek(1); err != nil {
			return nil, err
		}
	}
	have, reserved := 0, 0
	var buf *[]byte
	var b []byte
	for have < n {
		if reserved < n && reserved-have < ReadChunkBytes/2 {
			arrived := have
			if br != nil {
				arrived += br.Buffered()
			}
			total := min(n, arrived+ReadChunkBytes)
			if reserve != nil {
				if err := reserve(total); err != nil {
					p.putIf(buf)
					return nil, err
				}
			}
			reserved = total
		}
		if reserved > len(b) {
			buf, b = p.grow(buf, b[:have], min(n, max(reserved, 2*len(b))))
		}
		k, err := r.Read(b[have:reserved])
		if obs != nil && k > 0 {
			obs.Observe(b[:have+k], k)
		}
		have += k
		if err != nil && have < n {
			p.putIf(buf)
			if errors.Is(err, io.EOF) && have > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	if buf == nil {
		buf = p.Get(0)
	}
	*buf = b[:n]
	return buf, nil
}

// grow moves the bytes read so far into a buffer of at least size bytes,
// giving back the old one; it returns the buffer at its full capacity.
func (p *BufPool) grow(buf *[]byte, read []byte, size int) (*[]byte, []byte) {
	bigger := p.Get(size)
	*bigger = append((*bigger)[:0], read...)
	p.putIf(buf)
	return bigger, (*bigger)[:cap(*bigger)]
}

func (p *BufPool) putIf(buf *[]byte) {
	if buf != nil {
		p.Put(buf)
	}
}
