package proxy

// Reading a request frame that is still arriving, in as few reads and
// copies as the budget allows: the bytes the kernel already holds for the
// socket count as arrived, so they are reserved and read at once, and the
// frame's buffer is taken whole as soon as half of it is reserved.

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/kproxy/kproxy/internal/kwire"
)

// readArrived reads an n-byte frame body from br as
// kwire.BufPool.ReadGrowingReserved does: it reserves before reading bytes
// up to the reservation, which only grows, ends at n and is at most the
// bytes that have arrived plus kwire.ReadChunkBytes; an error from reserve
// or from the read ends it with nothing kept. What differs is for fewer
// syscalls and copies per MB:
//   - arrived also counts what the kernel holds unread for the socket
//     (queued, nil: not known), asked before the first reservation and
//     after each read that filled what it was given (a read that did not
//     found the kernel's queue empty), unless one more chunk reaches the
//     frame's end (a frame of at most 64 KiB beyond what br holds): then
//     the count would change nothing, and it costs a syscall a request.
//     reserve(total, least) takes total, or least (what br's buffer alone
//     shows, as kwire reserves) when it cannot have total now, and
//     returns what it took. A frame the kernel
//     holds is then reserved at once and read in as many calls as the
//     kernel needs, not in 64 KiB steps.
//   - the buffer doubles as it fills, as kwire's does (so it is at most
//     twice total), but takes the frame's full size as soon as that
//     buffer is no more than twice total: the rest is read straight into
//     place instead of being copied again at each doubling.
//   - before it first grows the buffer, it asks spare (nil: never) for a
//     free buffer of the frame's full size: one the pool holds already,
//     lent beyond the reservation (guard.lend bounds how much), so the
//     frame is read in place with no copy at all. Each doubling copies
//     what was read; those copies were 17% of the proxy's CPU in a
//     profile of 1 KiB records in 1 MiB requests.
//
// obs, if not nil, sees each read's bytes right after it (kwire.Observer).
// observedReadBytes caps one read of a frame an Observer watches: the
// observer must see the bytes while the read has just put them in the
// cache, and a read of megabytes at once would have evicted the first ones
// (measured: validation's frame-time CRC lost its gain without the cap).
const observedReadBytes = 256 << 10

func readArrived(br *bufio.Reader, queued func() int, obs kwire.Observer, bufs bufPool, spare func(n int) *[]byte, n int, reserve func(total, least int) (int, error)) (*[]byte, error) {
	if n > 0 {
		if _, err := br.Peek(1); err != nil {
			return nil, err
		}
	}
	have, reserved := 0, 0
	ask := queued != nil // ask the kernel before the next reservation
	var buf *[]byte
	var b []byte
	for have < n {
		if reserved < n && reserved-have < kwire.ReadChunkBytes/2 {
			least := min(n, have+br.Buffered()+kwire.ReadChunkBytes)
			total := least
			if ask && least < n { // else the count cannot change total: save the syscall
				total = min(n, least+queued())
			}
			got, err := reserve(total, least)
			if err != nil {
				putIf(bufs, buf)
				return nil, err
			}
			reserved = got
		}
		if reserved > len(b) {
			size := min(n, max(reserved, 2*len(b)))
			if bufs.Cap(n) <= 2*reserved {
				size = n
			}
			var bigger *[]byte
			if size < n && spare != nil {
				bigger, spare = spare(n), nil // asked once a frame
			}
			if bigger == nil {
				bigger = bufs.Get(size)
			}
			buf, b = moveBuf(bufs, buf, b[:have], bigger)
		}
		end := reserved
		if obs != nil { // read in pieces the cache still holds when obs sees them
			end = min(reserved, have+observedReadBytes)
		}
		want := end - have
		k, err := br.Read(b[have:end])
		if obs != nil && k > 0 {
			obs.Observe(b[:have+k], k) // kwire.Observer: right after the read
		}
		have += k
		ask = queued != nil && k == want
		if err != nil && have < n {
			putIf(bufs, buf)
			if errors.Is(err, io.EOF) && have > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	if buf == nil {
		buf = bufs.Get(0)
	}
	*buf = b[:n]
	return buf, nil
}

// moveBuf moves the bytes read so far into bigger, giving back the old
// buffer; it returns bigger at its full capacity.
func moveBuf(bufs bufPool, buf *[]byte, read []byte, bigger *[]byte) (*[]byte, []byte) {
	*bigger = append((*bigger)[:0], read...)
	putIf(bufs, buf)
	return bigger, (*bigger)[:cap(*bigger)]
}

func putIf(bufs bufPool, buf *[]byte) {
	if buf != nil {
		bufs.Put(buf)
	}
}

// socketQueue returns what tells how many bytes the kernel holds unread for
// nc, or nil when nc is not a plain TCP connection: through TLS the
// kernel's bytes are not the frame's, and a wrapping reader (a PROXY
// header's) may hold bytes of its own.
func socketQueue(nc net.Conn) func() int {
	tc, ok := nc.(*net.TCPConn)
	if !ok || !canQueryQueue {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return func() int { return unreadBytes(rc) }
}

// unreadBytes is what the kernel holds unread for rc's socket, 0 when it
// cannot tell.
func unreadBytes(rc syscall.RawConn) int {
	n := 0
	if err := rc.Control(func(fd uintptr) { n = unreadBytesOf(fd) }); err != nil {
		return 0
	}
	return n
}
