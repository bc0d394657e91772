package faultnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

const (
	// chunkSize is the read size on the delayed path.
	chunkSize = 32 << 10
	// delayQueue bounds the chunks in flight on the delayed path, so a slow
	// reader on the far side pushes back instead of growing memory.
	delayQueue = 64
	// userCopyBytes is the buffer of a user-space copy: large, so that the
	// copy makes as few read and write calls as the data allows (the floor
	// it stands for should not be raised by a small buffer).
	userCopyBytes = 1 << 20
)

// pump copies src to dst (direction dir of l) under the current faults
// until src reaches EOF (then it half-closes dst and returns nil) or
// something fails.
func (r *Relay) pump(l *link, dir int, dst, src *net.TCPConn) error {
	for {
		// Clear the deadline before reading the fault state: setFaults changes
		// the state before it sets deadlines, so either this read sees the new
		// state or the copy below is interrupted by the deadline.
		if err := src.SetReadDeadline(time.Time{}); err != nil {
			return fmt.Errorf("clear read deadline: %w", err)
		}
		f, changed := r.faults(l, dir)
		var err error
		switch {
		case f.cut:
			return errCut
		case f.paused:
			select {
			case <-changed:
				continue
			case <-r.done:
				return errCut
			}
		case f.delay > 0:
			err = r.copyDelayed(dst, src, f.delay)
		case r.userCopy:
			err = copyUserSpace(dst, src)
		default:
			// Splices socket to socket on Linux: no user-space copy.
			_, err = dst.ReadFrom(src)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue // faults changed
		}
		if err != nil {
			return err
		}
		if err := dst.CloseWrite(); err != nil {
			return fmt.Errorf("pass on half-close: %w", err)
		}
		return nil
	}
}

// copyUserSpace copies src to dst through a buffer until EOF (nil) or an
// error. The wrappers hide ReadFrom and WriteTo, which would splice.
func copyUserSpace(dst, src *net.TCPConn) error {
	buf := make([]byte, userCopyBytes)
	_, err := io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, buf)
	return err
}

// chunk is bytes read on the delayed path, to be written at due.
type chunk struct {
	buf *[]byte
	n   int
	due time.Time
}

// copyDelayed reads src into a bounded queue of chunks, each due d after it
// was read, while a writer goroutine writes them to dst when due. It returns
// nil at EOF, or the first error; on a deadline (faults changed) it returns
// after every chunk already read has been written, so order is kept when the
// caller switches to another path.
func (r *Relay) copyDelayed(dst, src *net.TCPConn, d time.Duration) error {
	queue := make(chan chunk, delayQueue)
	werr := make(chan error, 1)
	go func() { werr <- r.writeDelayed(dst, src, queue) }() // joined below
	var rerr error
	for rerr == nil {
		bp := r.bufs.Get().(*[]byte)
		n, err := src.Read(*bp)
		if n > 0 {
			queue <- chunk{buf: bp, n: n, due: time.Now().Add(d)}
		} else {
			r.bufs.Put(bp)
		}
		rerr = err
	}
	close(queue)
	if err := <-werr; err != nil {
		return err
	}
	if rerr == io.EOF {
		return nil
	}
	return rerr
}

// writeDelayed writes queued chunks when due. After a failure it keeps
// draining the queue (so the reader never blocks on it) and interrupts the
// reader with a read deadline.
func (r *Relay) writeDelayed(dst, src *net.TCPConn, queue <-chan chunk) error {
	var failed error
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for c := range queue {
		if failed == nil {
			if failed = r.writeChunk(dst, c, timer); failed != nil {
				_ = src.SetReadDeadline(time.Now())
			}
		}
		r.bufs.Put(c.buf)
	}
	return failed
}

// writeChunk waits until c is due and the relay is not paused, then writes it.
func (r *Relay) writeChunk(dst *net.TCPConn, c chunk, timer *time.Timer) error {
	if wait := time.Until(c.due); wait > 0 {
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-r.done:
			return errCut
		}
	}
	for {
		f, changed := r.faults(nil, 0)
		if f.cut {
			return errCut
		}
		if !f.paused {
			break
		}
		select {
		case <-changed:
		case <-r.done:
			return errCut
		}
	}
	if _, err := dst.Write((*c.buf)[:c.n]); err != nil {
		return fmt.Errorf("write delayed chunk: %w", err)
	}
	return nil
}
